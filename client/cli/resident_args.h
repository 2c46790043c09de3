// The array commands' resident options (issue 56; Resident in gpuscan.proto): --ref ID names the
// values the server keeps instead of an input file, --flags-ref, --keys-ref and --values-ref the
// operation's other inputs, and --keep (--ttl-ms, --label) keeps the results on the server,
// printing their ids as put does. Each command adds those it takes (AddResidentOptions) and runs
// its resident form when --ref is given.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "gpuscan/client.h"
#include "report.h"

namespace gpuscan::cli {

struct ResidentArgs {
  std::string ref, flags_ref, keys_ref, values_ref;  // ids (48 hex digits); empty: not given
  bool keep = false;
  uint64_t ttl_ms = 0;  // with keep: the kept arrays' ttl (0: the server's)
  std::string label;    // with keep: their label
};

// Which of the options beside --ref a command takes.
enum ResidentOption : unsigned { kFlagsRef = 1, kKeysRef = 2, kValuesRef = 4, kKeep = 8 };

// Adds --ref (excluding `file_options`, the options that read or shape the input files) and the
// `which` options, each of which needs --ref; --keep also excludes -o. Returns --ref.
CLI::Option* AddResidentOptions(CLI::App* cmd, ResidentArgs& r, unsigned which,
                                std::initializer_list<const char*> file_options);

// A resident call's arrays as the server describes them now (their dtypes and counts; id empty
// where the option was not given).
struct ResidentArrays {
  v1::ArrayInfo values, flags, keys, sort_values;
};
ResidentArrays AskResidentArrays(Client& client, const ResidentArgs& r);

// header.resident: the arrays' ids, and --keep with its ttl and label.
void SetResident(v1::Resident* resident, const ResidentArgs& r, const ResidentArrays& arrays);

// --keep's report: each kept array's id on its own line on stdout (text mode, in the order given),
// a note with its info, and a JSON field `name` of it. Arrays not kept (no id) are skipped.
void ReportKept(Report& report, std::initializer_list<std::pair<const char*, const v1::ArrayInfo*>> kept);

}  // namespace gpuscan::cli
