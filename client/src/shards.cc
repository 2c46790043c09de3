// One array across several servers (shards.h): shard calls run on threads of their own. When
// one fails, the others stop at their next chunk where they can (a scan shard's Source and Sink
// throw; reduce and compact shards finish their call), and the first failure is rethrown.
// Results are combined with the product's operator definitions (gpuscan/kernels/operators.h,
// header-only, host code here), so a fix-up rounds exactly as the engines do.
#include "shards.h"

#include <grpcpp/support/channel_arguments.h>

#include <atomic>
#include <exception>
#include <thread>

#include "gpuscan/kernels/operators.h"
#include "targets.h"
#include "typed_support.h"

namespace gpuscan::detail {

std::vector<Client*> ShardPool::Clients(uint32_t shards) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!expanded_) {
    addresses_ = ExpandTarget(options_, &tls_name_);
    expanded_ = true;
  }
  const size_t a = addresses_.size();
  const uint64_t first = rotation_++;
  std::vector<Client*> out;
  std::vector<std::shared_ptr<grpc::Channel>> fresh;  // made for this call: connect them first
  std::vector<std::string> fresh_what, fresh_targets;
  for (uint32_t i = 0; i < shards; ++i) {
    const std::string& address = addresses_[(first + i) % a];
    // Shards on one address differ in i / a: each gets a connection of its own.
    const uint32_t connection = i / static_cast<uint32_t>(a);
    std::unique_ptr<Client>& client = clients_[{address, connection}];
    if (!client) {
      ClientOptions o = options_;
      o.shards = 1;
      if (address != options_.target) {
        o.target = address;
        o.load_balancing_policy.clear();  // one address
        if (o.tls.server_name.empty()) o.tls.server_name = tls_name_;
      }
      o.channel_int_args["gpuscan.shard"] = static_cast<int>(connection);
      o.channel_int_args[GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL] = 1;
      client = std::make_unique<Client>(std::move(o));
      fresh.push_back(client->channel());
      fresh_what.push_back("shard " + std::to_string(i) + " of " + std::to_string(shards));
      fresh_targets.push_back(address);
    }
    out.push_back(client.get());
  }
  lock.unlock();
  // Long enough for gRPC's first reconnect; a server that is down still fails its shard soon,
  // with the shard's own message.
  ConnectAll(fresh, fresh_what, fresh_targets, std::min(ConnectWait(options_), std::chrono::milliseconds(3000)),
             /*required=*/false);
  return out;
}

bool Shardable(v1::DType dtype, v1::Operator op, v1::ScanAlgorithm algorithm) {
  const bool is_float = dtype == v1::DTYPE_FLOAT32 || dtype == v1::DTYPE_FLOAT64;
  const bool rounds = op == v1::OPERATOR_SUM || op == v1::OPERATOR_PRODUCT;
  const bool canonical = algorithm == v1::SCAN_ALGORITHM_DEFAULT || algorithm == v1::SCAN_ALGORITHM_DETERMINISTIC;
  return !(is_float && rounds && canonical);
}

std::vector<size_t> ShardBounds(size_t n, size_t per_chunk, uint32_t shards) {
  per_chunk = std::max<size_t>(per_chunk, 1);
  const size_t chunks = (n + per_chunk - 1) / per_chunk;
  std::vector<size_t> bounds(shards + 1);
  for (uint32_t s = 0; s <= shards; ++s) bounds[s] = std::min(n, chunks * s / shards * per_chunk);
  return bounds;
}

namespace {

// Thrown by a shard's Source or Sink once another shard failed: cancels that shard's call.
struct ShardCancelled : std::exception {
  const char* what() const noexcept override { return "gpuscan: shard cancelled after another shard failed"; }
};

// Runs run(s) for every shard at once; rethrows the first shard's failure (in shard order,
// cancellations aside), its message prefixed with the shard and its server.
template <class F>
void RunShards(const std::vector<Client*>& clients, std::atomic<bool>& failed, F&& run) {
  const size_t count = clients.size();
  std::vector<std::exception_ptr> errors(count);
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (size_t s = 0; s < count; ++s) {
    threads.emplace_back([&, s] {
      try {
        run(s);
      } catch (...) {
        errors[s] = std::current_exception();
        failed = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t s = 0; s < count; ++s) {
    if (!errors[s]) continue;
    try {
      std::rethrow_exception(errors[s]);
    } catch (const ShardCancelled&) {
      continue;
    } catch (const RpcError& e) {
      throw RpcError(e.code(), "shard " + std::to_string(s) + " of " + std::to_string(count) + " (server " +
                                   clients[s]->options().target + "): " + e.message());
    }
  }
}

// A shard's input, by position (its lanes read at once); stops once another shard failed.
Source ShardSource(const void* data, size_t bytes, const std::atomic<bool>& failed) {
  return SourceAt(bytes, [in = SourceAt::Memory(data, bytes), &failed](uint64_t offset, void* buf, size_t n) {
    if (failed) throw ShardCancelled();
    in.ReadAt(offset, buf, n);
  });
}

// f(op) with the operator functor of `op` for T.
template <class T, class F>
void WithOperator(v1::Operator op, F&& f) {
  switch (op) {
    case v1::OPERATOR_SUM: return f(ops::Sum<T>());
    case v1::OPERATOR_PRODUCT: return f(ops::Product<T>());
    case v1::OPERATOR_MIN: return f(ops::Min<T>());
    case v1::OPERATOR_MAX: return f(ops::Max<T>());
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case v1::OPERATOR_BIT_AND: return f(ops::BitAnd<T>());
      case v1::OPERATOR_BIT_OR: return f(ops::BitOr<T>());
      case v1::OPERATOR_BIT_XOR: return f(ops::BitXor<T>());
      default: break;
    }
  }
  // Every shard's server accepted the operator, so this is a client bug.
  throw RpcError(grpc::StatusCode::INTERNAL, "shards: no operator " + std::to_string(int(op)) + " for this dtype");
}

// One Timing for the whole sharded call: sizes and chunks summed; stage times the longest
// shard's (the shards ran at once); engine, device and algorithm of shard 0.
Timing Merge(const std::vector<Timing>& t) {
  Timing m = t.front();
  for (size_t s = 1; s < t.size(); ++s) {
    for (auto field : {&Timing::receive_us, &Timing::queue_us, &Timing::h2d_us, &Timing::kernel_us, &Timing::d2h_us,
                       &Timing::send_us, &Timing::total_us}) {
      m.*field = std::max(m.*field, t[s].*field);
    }
    m.bytes_in += t[s].bytes_in;
    m.bytes_out += t[s].bytes_out;
    m.chunks += t[s].chunks;
  }
  return m;
}

}  // namespace

template <class T>
Timing ShardedScan(const std::vector<Client*>& clients, const std::vector<size_t>& bounds, const T* data, T* out,
                   const ScanOptions& options) {
  const size_t count = clients.size();
  std::vector<Timing> timings(count);
  std::atomic<bool> failed{false};
  RunShards(clients, failed, [&](size_t s) {
    const size_t begin = bounds[s], len = bounds[s + 1] - begin;
    BufferSink sink(out + begin, len * sizeof(T), "shard " + std::to_string(s));
    timings[s] = clients[s]->ScanStream(
        ScanHeaderFor<T>(options, len), Replay([&, begin, len] { return ShardSource(data + begin, len * sizeof(T), failed); }),
        SinkAt([&, at = sink.at()](uint64_t offset, const void* p, size_t b) {
          if (failed) throw ShardCancelled();
          at.WriteAt(offset, p, b);
        }),
        {}, options.lanes);
    sink.CheckFull();
  });
  // Shard s > 0 continues from the carry of shards 0..s-1: out = carry op local, one pass per
  // shard, the shards at once.
  WithOperator<T>(options.op, [&](auto op) {
    std::vector<T> carry(count);
    T running{};
    for (size_t s = 0; s < count; ++s) {
      const size_t last = bounds[s + 1] - 1;
      const T total = options.exclusive ? op(out[last], data[last]) : out[last];
      if (s == 0) {
        running = total;
      } else {
        carry[s] = running;
        running = op(running, total);
      }
    }
    std::vector<std::thread> threads;
    for (size_t s = 1; s < count; ++s) {
      threads.emplace_back([&, s] {
        const T c = carry[s];
        size_t i = bounds[s];
        if (options.exclusive) out[i++] = c;  // the local value there is the identity
        for (; i < bounds[s + 1]; ++i) out[i] = op(c, out[i]);
      });
    }
    for (auto& t : threads) t.join();
  });
  return Merge(timings);
}

template <class T>
ReduceResult<T> ShardedReduce(const std::vector<Client*>& clients, const std::vector<size_t>& bounds, const T* data,
                              v1::Operator op, uint32_t lanes) {
  const size_t count = clients.size();
  std::vector<ReduceResult<T>> parts(count);
  std::atomic<bool> failed{false};
  RunShards(clients, failed, [&](size_t s) {
    const size_t begin = bounds[s], len = bounds[s + 1] - begin;
    parts[s] = clients[s]->Reduce(data + begin, len, op, lanes, 1);
    if (failed) throw ShardCancelled();
  });
  ReduceResult<T> result = parts[0];
  std::vector<Timing> timings{parts[0].timing};
  WithOperator<T>(op, [&](auto f) {
    for (size_t s = 1; s < count; ++s) {
      result.value = f(result.value, parts[s].value);  // in shard order
      result.element_count += parts[s].element_count;
      timings.push_back(parts[s].timing);
    }
  });
  result.timing = Merge(timings);
  return result;
}

template <class T>
CompactResult<T> ShardedCompact(const std::vector<Client*>& clients, const std::vector<size_t>& bounds, const T* data,
                                const CompactOptions& options) {
  const size_t count = clients.size();
  const bool use_flags = options.use_flags || !options.flags.empty();
  std::vector<CompactResult<T>> parts(count);
  std::atomic<bool> failed{false};
  RunShards(clients, failed, [&](size_t s) {
    const size_t begin = bounds[s], len = bounds[s + 1] - begin;
    CompactOptions o = options;
    o.shards = 1;
    if (use_flags) {
      o.use_flags = true;
      // The flags of this shard's elements (the server checks the lengths of the whole).
      const size_t from = std::min(begin, options.flags.size());
      const size_t to = s + 1 == count ? options.flags.size() : std::min(begin + len, options.flags.size());
      o.flags.assign(options.flags.begin() + from, options.flags.begin() + to);
    }
    parts[s] = clients[s]->Compact(data + begin, len, o);
    if (failed) throw ShardCancelled();
  });
  CompactResult<T> result;
  std::vector<Timing> timings;
  for (size_t s = 0; s < count; ++s) {
    result.values.insert(result.values.end(), parts[s].values.begin(), parts[s].values.end());
    for (int64_t i : parts[s].indices) result.indices.push_back(i + static_cast<int64_t>(bounds[s]));
    result.kept_count += parts[s].kept_count;
    timings.push_back(parts[s].timing);
  }
  result.timing = Merge(timings);
  return result;
}

#define GPUSCAN_INSTANTIATE(T)                                                                                     \
  template Timing ShardedScan<T>(const std::vector<Client*>&, const std::vector<size_t>&, const T*, T*,             \
                                 const ScanOptions&);                                                              \
  template ReduceResult<T> ShardedReduce<T>(const std::vector<Client*>&, const std::vector<size_t>&, const T*,      \
                                            v1::Operator, uint32_t);                                               \
  template CompactResult<T> ShardedCompact<T>(const std::vector<Client*>&, const std::vector<size_t>&, const T*,    \
                                              const CompactOptions&);
GPUSCAN_FOR_EACH_ELEMENT_TYPE(GPUSCAN_INSTANTIATE)
#undef GPUSCAN_INSTANTIATE

}  // namespace gpuscan::detail
