#include "service/lane_registry.h"

#include <algorithm>

namespace gpuscan::server {

LaneRegistry::LaneRegistry(Admission* admission, Executor* executor, const ServerOptions* options)
    : admission_(admission), executor_(executor), options_(options), wait_(options->lane_wait), timer_([this] { TimerLoop(); }) {}

LaneRegistry::~LaneRegistry() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  timer_.join();
}

grpc::Status LaneRegistry::Find(const LaneSpec& spec, const google::protobuf::Message& header,
                                std::optional<uint64_t> declared, const char* rpc, std::type_index chunk_type,
                                std::shared_ptr<LaneJoin>* join) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto r = ended_.find(spec.array_id); r != ended_.end()) return EndedStatus(spec.array_id, r->second);
  auto it = joins_.find(spec.array_id);
  if (it == joins_.end()) {
    *join = std::make_shared<LaneJoin>(this, admission_, executor_, options_, spec, header, declared, rpc, chunk_type);
    joins_.emplace(spec.array_id, Entry{*join, LaneClock::now() + wait_});
    cv_.notify_one();
    return grpc::Status::OK;
  }
  if (it->second.join->chunk_type() != chunk_type) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "lanes of array " + ArrayIdText(spec.array_id) +
                                                    " disagree: the RPC (" + rpc + " here, " +
                                                    it->second.join->rpc() + " on the first lane)"};
  }
  *join = it->second.join;
  return grpc::Status::OK;
}

void LaneRegistry::Fail(const LaneSpec& spec, const grpc::Status& status) {
  std::shared_ptr<LaneJoin> join;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = joins_.find(spec.array_id); it != joins_.end()) {
      join = it->second.join;
    } else if (!ended_.count(spec.array_id)) {
      ended_.emplace(spec.array_id, grpc::Status(status.error_code(), "lanes.lane=" + std::to_string(spec.lane) +
                                                                          " of array " + ArrayIdText(spec.array_id) +
                                                                          " failed: " + status.error_message()));
      ended_order_.push_back(spec.array_id);
    }
  }
  if (join) join->LaneFailed(spec.lane, status);
}

void LaneRegistry::Ended(const std::string& id, const grpc::Status& how) {
  std::lock_guard<std::mutex> lock(mu_);
  joins_.erase(id);
  if (ended_.emplace(id, how).second) ended_order_.push_back(id);
  while (ended_order_.size() > kEndedKept) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

void LaneRegistry::TimerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const auto now = LaneClock::now();
    auto next = LaneClock::time_point::max();
    std::vector<std::shared_ptr<LaneJoin>> expired;
    for (auto& [id, e] : joins_) {
      if (e.join->all_arrived()) continue;
      if (e.deadline <= now) {
        expired.push_back(e.join);
        e.deadline = LaneClock::time_point::max();  // told once; it leaves the map when released
      } else {
        next = std::min(next, e.deadline);
      }
    }
    if (!expired.empty()) {
      lock.unlock();  // the joins call lanes and come back to Ended
      for (auto& j : expired) j->Expire(wait_);
      lock.lock();
      continue;
    }
    if (next == LaneClock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, next);
    }
  }
}

}  // namespace gpuscan::server
