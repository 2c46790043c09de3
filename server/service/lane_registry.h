// The arrays in flight, by id, and the timer that fails arrays whose lanes do not all arrive
// within --lane-wait-ms (lane_join.h joins one array's lanes).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <typeindex>

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include "service/admission.h"
#include "service/executor.h"
#include "service/lane_join.h"
#include "service/lane_spec.h"
#include "service/server.h"

namespace gpuscan::server {

class LaneRegistry {
 public:
  LaneRegistry(Admission* admission, Executor* executor, const ServerOptions* options);
  ~LaneRegistry();  // stops the timer
  LaneRegistry(const LaneRegistry&) = delete;
  LaneRegistry& operator=(const LaneRegistry&) = delete;

  // The join of spec.array_id for this RPC, made when this is the array's first lane. A reused
  // id (an array that ended) or a join of another RPC (`chunk_type`, the RPC's request type,
  // differs): a status instead.
  grpc::Status Find(const LaneSpec& spec, const google::protobuf::Message& header, std::optional<uint64_t> declared,
                    const char* rpc, std::type_index chunk_type, std::shared_ptr<LaneJoin>* join);

  // A lane whose header was refused: its array fails now, naming it (or, when no sibling has
  // arrived yet, the id is remembered as failed, so siblings are told when they come).
  void Fail(const LaneSpec& spec, const grpc::Status& status);

  // The join is over: forget it and remember its id (and how it ended: OK or its failure) for a
  // while, so a late or reused lane is told.
  void Ended(const std::string& id, const grpc::Status& how);

 private:
  void TimerLoop();

  struct Entry {
    std::shared_ptr<LaneJoin> join;
    LaneClock::time_point deadline;
  };
  static constexpr size_t kEndedKept = 4096;  // ids remembered after their array ended

  Admission* admission_;
  Executor* executor_;
  const ServerOptions* options_;
  const std::chrono::milliseconds wait_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, Entry> joins_;
  std::map<std::string, grpc::Status> ended_;  // id -> how its array ended
  std::deque<std::string> ended_order_;
  std::thread timer_;
};

}  // namespace gpuscan::server
