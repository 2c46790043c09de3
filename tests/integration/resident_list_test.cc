// ListArrays a page at a time (ListArraysRequest.page_size / page_token): every array that lives
// through the listing once, in creation order, with arrays put and dropped between pages; the
// default and the largest page; tokens that name a position only (another tenant's token lists
// its own arrays); tokens the server did not issue, or of another run; the C++ client's
// ListArrays() gathering every page.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "resident_fixture.h"

namespace gpuscan::testing {
namespace resident_list_test {

using namespace resident;  // NOLINT: the fixture's helpers

class ResidentListTest : public ::testing::Test {
 protected:
  std::string PutOne(uint32_t seed, const std::string& tenant = "") {
    v1::ArrayInfo info;
    const grpc::Status s = Put(*stub_, v1::DTYPE_INT32, RandomBytes(4 * (1 + seed % 5), seed), &info, tenant);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return info.id();
  }
  grpc::Status Page(uint32_t size, const std::string& token, v1::ListArraysResponse* out,
                    const std::string& tenant = "") {
    grpc::ClientContext ctx;
    Tenant(&ctx, tenant);
    v1::ListArraysRequest req;
    req.set_page_size(size);
    req.set_page_token(token);
    *out = {};
    return stub_->ListArrays(&ctx, req, out);
  }
  void Drop(const std::string& id) {
    grpc::ClientContext ctx;
    v1::DropArrayRequest req;
    req.set_id(id);
    v1::DropArrayResponse resp;
    ASSERT_TRUE(stub_->DropArray(&ctx, req, &resp).ok());
  }

  TestServer server_{ResidentOptions()};
  std::unique_ptr<v1::GpuScan::Stub> stub_ = server_.stub();
};

TEST_F(ResidentListTest, PagesListEveryLivingArrayOnceInCreationOrder) {
  std::vector<std::string> made;  // creation order
  for (uint32_t i = 0; i < 600; ++i) made.push_back(PutOne(i));
  const std::string other = PutOne(9999, "bob");  // another tenant's: never listed here
  std::set<std::string> dropped_early, dropped_late, added;
  std::vector<std::string> listed;
  std::string token;
  uint32_t page = 0, seed = 10000;
  do {
    v1::ListArraysResponse r;
    const uint32_t size = 37 + page % 3;  // pages of changing sizes
    ASSERT_TRUE(Page(size, token, &r).ok());
    ASSERT_LE(r.arrays_size(), static_cast<int>(size));
    for (const v1::ArrayInfo& a : r.arrays()) listed.push_back(a.id());
    EXPECT_GT(r.tenant_bytes(), 0u);
    token = r.next_page_token();
    if (!token.empty()) EXPECT_EQ(r.arrays_size(), static_cast<int>(size));
    // Between pages: drop one not listed yet (five past the last listed) and one listed, put a new one.
    size_t last = 0;
    while (last < made.size() && made[last] != listed.back()) ++last;
    if (last + 5 < made.size() && !dropped_early.count(made[last + 5])) {
      Drop(made[last + 5]);
      dropped_early.insert(made[last + 5]);
    }
    const std::string& old = listed[listed.size() / 2];
    if (!dropped_late.count(old) && !added.count(old)) {
      Drop(old);
      dropped_late.insert(old);
    }
    if (page < 5) added.insert(PutOne(seed++));
    ++page;
  } while (!token.empty() && page < 100);
  EXPECT_TRUE(token.empty()) << "the listing did not end";
  EXPECT_GT(page, 15u);
  // Once each, in creation order; the dropped-early ones never; every survivor of the whole
  // listing listed; the new ones at most once, after every first array.
  std::map<std::string, int> seen;
  for (const std::string& id : listed) ++seen[id];
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << "listed twice";
  EXPECT_EQ(seen.count(other), 0u);
  std::vector<std::string> expected;
  for (const std::string& id : made) {
    if (!dropped_early.count(id)) expected.push_back(id);
  }
  std::vector<std::string> firsts;
  for (const std::string& id : listed) {
    if (!added.count(id)) firsts.push_back(id);
  }
  EXPECT_EQ(firsts, expected);
  EXPECT_EQ(listed.size() - firsts.size(), added.size());  // made before the listing reached the end
}

TEST_F(ResidentListTest, DefaultAndLargestPagesAndTokensThatNameOnlyAPosition) {
  for (uint32_t i = 0; i < 30; ++i) PutOne(i);
  for (uint32_t i = 0; i < 3; ++i) PutOne(100 + i, "bob");
  v1::ListArraysResponse r;
  ASSERT_TRUE(Page(0, "", &r).ok());  // the default page (1000) holds all 30
  EXPECT_EQ(r.arrays_size(), 30);
  EXPECT_TRUE(r.next_page_token().empty());
  ASSERT_TRUE(Page(4000000000u, "", &r).ok());  // past the maximum: the maximum, not a refusal
  EXPECT_EQ(r.arrays_size(), 30);
  ASSERT_TRUE(Page(30, "", &r).ok());  // exactly full: no next page
  EXPECT_TRUE(r.next_page_token().empty());
  ASSERT_TRUE(Page(10, "", &r).ok());
  ASSERT_FALSE(r.next_page_token().empty());
  // Alice's token used by bob: bob's own arrays made after that position (none of alice's).
  v1::ListArraysResponse bob;
  ASSERT_TRUE(Page(10, r.next_page_token(), &bob, "bob").ok());
  EXPECT_EQ(bob.arrays_size(), 3);
  for (const v1::ArrayInfo& a : bob.arrays()) EXPECT_EQ(a.label(), "test");
  v1::ListArraysResponse all;
  ASSERT_TRUE(Page(0, "", &all, "bob").ok());
  EXPECT_EQ(all.arrays_size(), 3);
}

TEST_F(ResidentListTest, TokensTheServerDidNotIssueAreRefusedByName) {
  PutOne(1);
  PutOne(2);
  v1::ListArraysResponse r;
  ASSERT_TRUE(Page(1, "", &r).ok());
  const std::string good = r.next_page_token();
  ASSERT_FALSE(good.empty());
  for (const std::string& bad : {std::string("zz"), good + "x", good.substr(0, good.size() - 1) + "g",
                                 good.substr(0, good.find('.') + 1), std::string(good.size(), '.')}) {
    const grpc::Status s = Page(1, bad, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_NE(s.error_message().find("page_token"), std::string::npos) << s.error_message();
  }
  // A token of another run of the server (a second server's): named as such.
  TestServer other{ResidentOptions()};
  auto other_stub = other.stub();
  for (uint32_t i = 0; i < 2; ++i) {
    v1::ArrayInfo info;
    ASSERT_TRUE(Put(*other_stub, v1::DTYPE_INT32, RandomBytes(8, i), &info).ok());
  }
  grpc::ClientContext ctx;
  v1::ListArraysRequest req;
  req.set_page_size(1);
  ASSERT_TRUE(other_stub->ListArrays(&ctx, req, &r).ok());
  const grpc::Status s = Page(1, r.next_page_token(), &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("page_token is of another run of the server"), std::string::npos)
      << s.error_message();
}

TEST_F(ResidentListTest, TheClientGathersEveryPage) {
  std::vector<std::string> made;
  for (uint32_t i = 0; i < 1234; ++i) made.push_back(PutOne(i));  // past the default page of 1000
  Client client(server_.client_options());
  const v1::ListArraysResponse all = client.ListArrays();
  ASSERT_EQ(all.arrays_size(), 1234);
  for (int i = 0; i < all.arrays_size(); ++i) EXPECT_EQ(all.arrays(i).id(), made[i]);
  EXPECT_TRUE(all.next_page_token().empty());
  EXPECT_GT(all.tenant_bytes(), 0u);
  v1::ListArraysRequest one;
  one.set_page_size(1000);
  EXPECT_EQ(client.ListArrays(one).arrays_size(), 1000);
}

}  // namespace resident_list_test
}  // namespace gpuscan::testing
