// The raw RPCs' wire (service/wire.h) and their payload memory (service/payload.h): messages read
// from arbitrarily cut slices equal protobuf's own parse, encodings parse back with protobuf,
// malformed bytes get INVALID_ARGUMENT, and pool blocks come back once gRPC lets go of them.
#include <gtest/gtest.h>

#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "raw_messages.h"  // client/src: the client side of the same encodings
#include "service/wire.h"

namespace gpuscan::server {
namespace {

using google::protobuf::util::MessageDifferencer;

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// `bytes` cut into slices at random places, with empty slices and one-byte slices among them.
grpc::ByteBuffer Cut(const std::string& bytes, std::mt19937_64& rng) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  while (at < bytes.size()) {
    if (rng() % 8 == 0) slices.emplace_back();  // empty
    const size_t kind = rng() % 4;
    const size_t want = kind == 0 ? 1 : kind == 1 ? 1 + rng() % 7 : 1 + rng() % 40000;
    const size_t take = std::min(want, bytes.size() - at);
    slices.emplace_back(bytes.data() + at, take);
    at += take;
  }
  if (slices.empty()) slices.emplace_back();
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST(WireTest, ScanRequestsCutAnywhereDecodeAsProtobufParsesThem) {
  auto pool = PayloadPool::Create(1 << 16, 1 << 20, nullptr);
  std::mt19937_64 rng(7);
  const size_t sizes[] = {0, 1, 3, 4, 127, 128, 16383, 16384, 16385, 65535, 65536, 65537, 200000};
  for (size_t n : sizes) {
    for (int rep = 0; rep < 4; ++rep) {
      v1::ScanRequest original;
      if (rep % 2 == 0) {
        original.mutable_header()->set_dtype(v1::DTYPE_INT32);
        original.mutable_header()->set_op(v1::OPERATOR_MAX);
        original.mutable_header()->set_element_count(rng());
      }
      original.set_data(RandomBytes(rng, n));
      const std::string wire = original.SerializeAsString();
      ScanChunk chunk;
      ASSERT_TRUE(DecodeWithPayload(Cut(wire, rng), v1::ScanRequest::kDataFieldNumber, *pool, &chunk.msg, &chunk.data,
                                    "the ScanRequest")
                      .ok())
          << n;
      ASSERT_EQ(chunk.data.size(), n);
      EXPECT_EQ(std::string(chunk.data.data(), n), original.data()) << n;
      EXPECT_EQ(chunk.data.pooled(), n > 0 && n <= (1 << 16)) << n;  // an empty field is not sent
      v1::ScanRequest rest = original;
      rest.clear_data();
      EXPECT_TRUE(MessageDifferencer::Equals(chunk.msg, rest)) << n;
    }
  }
}

TEST(WireTest, FieldOrderRepeatsAndUnknownFieldsFollowProtobuf) {
  auto pool = PayloadPool::Create(4096, 1 << 20, nullptr);
  std::mt19937_64 rng(11);
  v1::ScanRequest a, b;
  a.set_data(RandomBytes(rng, 100));
  b.mutable_header()->set_dtype(v1::DTYPE_FLOAT64);
  b.set_data(RandomBytes(rng, 300));
  // Data first, then the header and a second data (the last occurrence wins), then an unknown
  // field 99 of each wire type.
  std::string wire = a.SerializeAsString() + b.SerializeAsString();
  wire += std::string("\x98\x06\x05", 3);                 // field 99, varint 5
  wire += std::string("\x99\x06") + std::string(8, 'x');  // field 99, fixed64
  wire += std::string("\x9a\x06\x02yz", 5);               // field 99, 2 bytes
  wire += std::string("\x9d\x06") + std::string(4, 'w');  // field 99, fixed32
  v1::ScanRequest expected;
  ASSERT_TRUE(expected.ParseFromString(wire));
  ASSERT_EQ(expected.data(), b.data());
  ScanChunk chunk;
  ASSERT_TRUE(
      DecodeWithPayload(Cut(wire, rng), v1::ScanRequest::kDataFieldNumber, *pool, &chunk.msg, &chunk.data, "x").ok());
  EXPECT_EQ(std::string(chunk.data.data(), chunk.data.size()), b.data());
  EXPECT_EQ(chunk.msg.header().dtype(), v1::DTYPE_FLOAT64);
  expected.clear_data();
  // The unknown fields survive (protobuf keeps them; a re-serialization carries them on).
  EXPECT_EQ(chunk.msg.SerializeAsString().size(), expected.SerializeAsString().size());
}

TEST(WireTest, MalformedBytesAreInvalidArgumentNamingTheMessage) {
  auto pool = PayloadPool::Create(4096, 1 << 20, nullptr);
  const std::string cases[] = {
      std::string("\x12", 1),                     // data tag, no length
      std::string("\x12\x05" "abc", 5),           // 5 bytes said, 3 remain
      std::string("\x12\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 11),  // a length of 2^63+
      std::string("\x0b", 1),                     // field 1, start group
      std::string("\x07", 1),                     // field 0
      std::string("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11),  // an 11-byte tag
      std::string("\x0a\x02\x08\xff", 4),         // header whose varint is cut off inside it
      // A six-byte tag that names a valid field once re-encoded: protobuf reads tags in five
      // bytes and refuses it (the fuzzer's find, tests/fuzz/regressions/wire_six_byte_tag).
      std::string("\xb8\xb0\xe8\xac\x88\x00\x01\x10\xc7\xd8\x00\x60\x04", 13),
      std::string("\x12\x80\x80\x80\x80\x80\x00", 7),  // a length in six bytes
      std::string("\x12\x80\x80\x80\x80\x08", 6),  // a length of 2^31
  };
  std::mt19937_64 rng(3);
  for (const std::string& wire : cases) {
    ScanChunk chunk;
    grpc::Status s =
        DecodeWithPayload(Cut(wire, rng), v1::ScanRequest::kDataFieldNumber, *pool, &chunk.msg, &chunk.data,
                          "the ScanRequest");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << ::testing::PrintToString(wire);
    EXPECT_NE(s.error_message().find("the ScanRequest is not a valid message"), std::string::npos) << s.error_message();
  }
}

TEST(WireTest, RandomBytesNeverCrashAndAcceptedOnesAgreeWithProtobuf) {
  auto pool = PayloadPool::Create(4096, 1 << 20, nullptr);
  std::mt19937_64 rng(5);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string wire = RandomBytes(rng, rng() % 64);
    if (i % 3 == 0) wire = std::string("\x12", 1) + static_cast<char>(rng() % 80) + wire;  // a data field
    ScanChunk chunk;
    if (!DecodeWithPayload(Cut(wire, rng), v1::ScanRequest::kDataFieldNumber, *pool, &chunk.msg, &chunk.data, "x")
             .ok()) {
      continue;
    }
    ++accepted;
    v1::ScanRequest parsed;
    ASSERT_TRUE(parsed.ParseFromString(wire)) << ::testing::PrintToString(wire);
    EXPECT_EQ(std::string(chunk.data.data(), chunk.data.size()), parsed.data());
  }
  EXPECT_GT(accepted, 40);  // the loop did check something (65 with this seed)
}

// Compact carries two bytes fields each way: values and flags in, kept values and indices out.
TEST(WireTest, CompactsTwoFieldsDecodeAndEncodeAsProtobufDoes) {
  auto pool = PayloadPool::Create(1 << 16, 1 << 20, nullptr);
  std::mt19937_64 rng(17);
  const size_t sizes[] = {0, 1, 4, 127, 128, 16384, 65536, 65537};
  for (size_t n : sizes) {
    for (size_t f : {size_t{0}, n / 4, n + 3}) {
      v1::CompactRequest original;
      if (f % 2 == 0) original.mutable_header()->set_use_flags(true);
      original.set_values(RandomBytes(rng, n));
      original.set_flags(RandomBytes(rng, f));
      // Flags before values, and a repeat of values whose last occurrence wins: any field order.
      v1::CompactRequest flags_first;
      flags_first.set_flags(original.flags());
      flags_first.set_values(RandomBytes(rng, 3));
      const std::string wire = flags_first.SerializeAsString() + original.SerializeAsString();
      v1::CompactRequest expected;
      ASSERT_TRUE(expected.ParseFromString(wire));
      CompactChunk chunk;
      grpc::ByteBuffer in = Cut(wire, rng);
      ASSERT_TRUE(DecodeChunk(in, *pool, &chunk, "the CompactRequest").ok()) << n << " " << f;
      EXPECT_EQ(std::string(chunk.values.data(), chunk.values.size()), expected.values()) << n;
      EXPECT_EQ(std::string(chunk.flags.data(), chunk.flags.size()), expected.flags()) << f;
      v1::CompactRequest rest = expected;
      rest.clear_values();
      rest.clear_flags();
      EXPECT_TRUE(MessageDifferencer::Equals(chunk.msg, rest));

      CompactReply reply;
      reply.msg.set_kept_offset(rng());
      reply.values = pool->Take(n);
      reply.indices = pool->Take(f);
      const std::string values = RandomBytes(rng, n), indices = RandomBytes(rng, f);
      if (n) std::memcpy(reply.values.data(), values.data(), n);
      if (f) std::memcpy(reply.indices.data(), indices.data(), f);
      const CompactReply copy(reply);  // what a lane's final response copy does
      v1::CompactResponse parsed;
      ASSERT_TRUE(parsed.ParseFromString(Flatten(Encode(std::move(reply)))));
      EXPECT_EQ(parsed.values(), values);
      EXPECT_EQ(parsed.indices(), indices);
      EXPECT_EQ(parsed.kept_offset(), copy.msg.kept_offset());
      EXPECT_EQ(std::string(copy.indices.data(), copy.indices.size()), indices);
    }
  }
}

TEST(WireTest, EncodedResponsesParseWithProtobufAndReferenceThePayload) {
  auto pool = PayloadPool::Create(1 << 16, 1 << 20, nullptr);
  std::mt19937_64 rng(13);
  for (size_t n : {size_t{0}, size_t{1}, size_t{4096}, size_t{1} << 16, (size_t{1} << 16) + 1}) {
    v1::ScanResponse msg;
    msg.set_offset(rng());
    msg.mutable_timing()->set_kernel_us(42);
    Payload data = pool->Take(n);
    const std::string bytes = RandomBytes(rng, n);
    if (n) std::memcpy(data.data(), bytes.data(), n);
    const char* where = data.data();
    grpc::ByteBuffer encoded = EncodeWithPayload(msg, v1::ScanResponse::kDataFieldNumber, std::move(data));
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(encoded.Dump(&slices).ok());
    if (n) {
      ASSERT_EQ(slices.size(), 2u);
      EXPECT_EQ(reinterpret_cast<const char*>(slices[1].begin()), where);  // referenced, not copied
    }
    v1::ScanResponse parsed;
    ASSERT_TRUE(parsed.ParseFromString(Flatten(encoded)));
    EXPECT_EQ(parsed.data(), bytes);
    EXPECT_EQ(parsed.offset(), msg.offset());
    EXPECT_EQ(parsed.timing().kernel_us(), 42u);
  }
}

TEST(ClientWireTest, TheSinkGetsWholeElementsHoweverGrpcCutTheSlices) {
  std::mt19937_64 rng(17);
  for (size_t esize : {size_t{4}, size_t{8}}) {
    for (int rep = 0; rep < 50; ++rep) {
      v1::ScanResponse original;
      original.set_offset(rng());
      original.set_data(RandomBytes(rng, esize * (rng() % 5000)));
      grpc::ByteBuffer wire_bytes = Cut(original.SerializeAsString(), rng);
      detail::RawIn<v1::ScanResponse> in;
      ASSERT_TRUE(grpc::SerializationTraits<detail::RawIn<v1::ScanResponse>>::Deserialize(&wire_bytes, &in).ok());
      EXPECT_EQ(in.msg.offset(), original.offset());
      ASSERT_EQ(in.data_bytes(), original.data().size());
      std::string got;
      size_t calls = 0;
      Sink sink = [&](const void* p, size_t n) {
        EXPECT_EQ(n % esize, 0u) << "a Sink call of " << n << " bytes";
        got.append(static_cast<const char*>(p), n);
        ++calls;
      };
      detail::ElementFeeder feeder(sink, esize);
      feeder.Feed(in.split.field);
      EXPECT_EQ(got, original.data());
      if (!original.data().empty()) {
        EXPECT_GT(calls, 0u);
      }
    }
  }
}

TEST(ClientWireTest, ARequestSliceIsSentByReferenceAndParsesAsTheMessage) {
  std::mt19937_64 rng(19);
  const std::string bytes = RandomBytes(rng, 100000);
  detail::RawOut<v1::ScanRequest> out;
  out.msg.mutable_header()->set_dtype(v1::DTYPE_INT64);
  size_t at = 0;
  Source source = [&](void* buf, size_t max) {  // in pieces, as a file's reads may come
    const size_t n = std::min({max, bytes.size() - at, size_t{7000}});
    std::memcpy(buf, bytes.data() + at, n);
    at += n;
    return n;
  };
  bool ended = false;
  out.data = detail::NextChunk(source, 131072, ended);  // the Source ends before the chunk fills
  EXPECT_TRUE(ended);
  EXPECT_EQ(out.data.size(), bytes.size());
  grpc::ByteBuffer encoded;
  bool own = false;
  ASSERT_TRUE(grpc::SerializationTraits<detail::RawOut<v1::ScanRequest>>::Serialize(out, &encoded, &own).ok());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(encoded.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[1].begin(), out.data.begin());  // the Source's slice itself
  v1::ScanRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(encoded)));
  EXPECT_EQ(parsed.header().dtype(), v1::DTYPE_INT64);
  EXPECT_EQ(parsed.data(), bytes);
}

TEST(PayloadPoolTest, BlocksComeBackWhenTheLastSliceGoesAndTheLimitSendsTheRestToTheHeap) {
  int registrations = 0;
  auto pool = PayloadPool::Create(4096, 3 * 4096, [&](void*, uint64_t bytes) {
    ++registrations;
    EXPECT_EQ(bytes, 3u * 4096);
    return std::shared_ptr<void>(new int(0), [](void* p) { delete static_cast<int*>(p); });
  });
  Payload a = pool->Take(4096), b = pool->Take(10), c = pool->Take(1);
  EXPECT_TRUE(a.pooled() && b.pooled() && c.pooled());
  EXPECT_EQ(registrations, 1);
  EXPECT_EQ(pool->stats().registered_bytes, 3u * 4096);
  Payload d = pool->Take(100);  // none free, at the limit
  EXPECT_FALSE(d.pooled());
  Payload big = pool->Take(4097);  // larger than a block
  EXPECT_FALSE(big.pooled());
  EXPECT_EQ(pool->stats().heap_payloads, 2u);
  const char* a_data = a.data();
  grpc::Slice slice = std::move(a).ToSlice();
  EXPECT_EQ(pool->stats().blocks_free, 0u);  // the slice holds it
  {
    grpc::Slice copy = slice;  // a second reference (gRPC's own)
    slice = grpc::Slice();
    EXPECT_EQ(pool->stats().blocks_free, 0u);
  }
  EXPECT_EQ(pool->stats().blocks_free, 1u);
  Payload again = pool->Take(8);
  EXPECT_EQ(again.data(), a_data);  // the same block, reused
  // The pool lives on while a block is out, after its owner let go.
  std::weak_ptr<PayloadPool> weak = pool;
  grpc::Slice held = std::move(b).ToSlice();
  c = Payload();
  again = Payload();
  pool.reset();
  EXPECT_FALSE(weak.expired());
  std::memset(const_cast<uint8_t*>(held.begin()), 1, held.size());  // still valid memory
  held = grpc::Slice();
  EXPECT_TRUE(weak.expired());
}

TEST(PayloadPoolTest, AZeroLimitMeansHeapOnly) {
  auto pool = PayloadPool::Create(4096, 0, nullptr);
  Payload p = pool->Take(16);
  EXPECT_FALSE(p.pooled());
  EXPECT_EQ(p.size(), 16u);
  EXPECT_EQ(pool->stats().arena_bytes, 0u);
}

}  // namespace
}  // namespace gpuscan::server
