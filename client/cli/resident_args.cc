// The array commands' resident options: --ref, --flags-ref, --keys-ref, --values-ref, --keep.
#include "resident_args.h"

#include <cstdio>
#include <stdexcept>
#include <tuple>

#include "resident_info.h"

namespace gpuscan::cli {

CLI::Option* AddResidentOptions(CLI::App* cmd, ResidentArgs& r, unsigned which,
                                std::initializer_list<const char*> file_options) {
  CLI::Option* ref = cmd->add_option("--ref", r.ref,
                                     "compute on the resident array of this id (gpuscan put) where the server keeps "
                                     "it, instead of an input file");
  for (const char* other : file_options) ref->excludes(cmd->get_option(other));
  if (which & kFlagsRef) {
    cmd->add_option("--flags-ref", r.flags_ref, "with --ref: the resident flags array (uint8/int8, one per element)")
        ->needs(ref);
  }
  if (which & kKeysRef) {
    cmd->add_option("--keys-ref", r.keys_ref, "with --ref: the resident keys array (integers, one per element)")
        ->needs(ref);
  }
  if (which & kValuesRef) {
    cmd->add_option("--values-ref", r.values_ref, "with --ref: the resident values moved with the keys")->needs(ref);
  }
  if (which & kKeep) {
    CLI::Option* keep = cmd->add_flag("--keep", r.keep,
                                      "with --ref: keep the results on the server as new resident arrays and print "
                                      "their ids instead of writing them")
                            ->needs(ref);
    if (CLI::Option* o = cmd->get_option_no_throw("-o")) keep->excludes(o);
    cmd->add_option("--ttl-ms", r.ttl_ms, "with --keep: the kept arrays' ttl (0 = the server's --resident-ttl-ms)")
        ->needs(keep);
    cmd->add_option("--label", r.label, "with --keep: the kept arrays' label")->needs(keep);
  }
  return ref;
}

ResidentArrays AskResidentArrays(Client& client, const ResidentArgs& r) {
  ResidentArrays a;
  for (auto [id, option, info] : {std::make_tuple(&r.ref, "--ref", &a.values),
                                  std::make_tuple(&r.flags_ref, "--flags-ref", &a.flags),
                                  std::make_tuple(&r.keys_ref, "--keys-ref", &a.keys),
                                  std::make_tuple(&r.values_ref, "--values-ref", &a.sort_values)}) {
    if (!id->empty()) *info = AskArrayInfo(client, ParseArrayId(*id, option));
  }
  for (auto [info, option] : {std::make_pair(&a.flags, "--flags-ref"), std::make_pair(&a.keys, "--keys-ref"),
                              std::make_pair(&a.sort_values, "--values-ref")}) {
    if (!info->id().empty() && info->element_count() != a.values.element_count()) {
      throw std::runtime_error(std::string(option) + " holds " + std::to_string(info->element_count()) +
                               " elements but --ref holds " + std::to_string(a.values.element_count()) +
                               "; one per element");
    }
  }
  return a;
}

void SetResident(v1::Resident* resident, const ResidentArgs& r, const ResidentArrays& arrays) {
  resident->set_values(arrays.values.id());
  resident->set_flags(arrays.flags.id());
  resident->set_keys(arrays.keys.id());
  resident->set_sort_values(arrays.sort_values.id());
  resident->set_keep(r.keep);
  resident->set_ttl_ms(r.ttl_ms);
  resident->set_label(r.label);
}

void ReportKept(Report& report, std::initializer_list<std::pair<const char*, const v1::ArrayInfo*>> kept) {
  for (const auto& [name, info] : kept) {
    if (info->id().empty()) continue;
    report.Field(name, ArrayInfoJson(*info));
    report.Note("kept " + ArrayInfoText(*info) + " (" + name + ")");
    if (!report.json()) std::printf("%s\n", ArrayIdHex(info->id()).c_str());
  }
  std::fflush(stdout);
}

}  // namespace gpuscan::cli
