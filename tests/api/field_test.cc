#include "api/field.h"

#include <gtest/gtest.h>

namespace tlt::api {
namespace {

TEST(Duration, ParsesKubernetesStyle) {
  double s = -1;
  ASSERT_TRUE(parse_duration("60s", &s));
  EXPECT_DOUBLE_EQ(s, 60);
  ASSERT_TRUE(parse_duration("1h30m", &s));
  EXPECT_DOUBLE_EQ(s, 5400);
  ASSERT_TRUE(parse_duration("500ms", &s));
  EXPECT_DOUBLE_EQ(s, 0.5);
  ASSERT_TRUE(parse_duration("1.5m", &s));
  EXPECT_DOUBLE_EQ(s, 90);
  ASSERT_TRUE(parse_duration("2m3s4ms", &s));
  EXPECT_DOUBLE_EQ(s, 123.004);
}

TEST(Duration, RejectsBareNumbersAndJunk) {
  double s = 7;
  for (const char* bad : {"", "60", "s", "sixty", "1x", "1.2.3s", "-5s", "5 s", ".s"}) {
    EXPECT_FALSE(parse_duration(bad, &s)) << bad;
  }
  EXPECT_EQ(s, 7) << "a failed parse must not write";
}

TEST(Quantity, AcceptsKubernetesSuffixes) {
  for (const char* ok : {"1", "500m", "8Gi", "1.5", "2e3", "+3", "0.25Ti", "100k", "1E-2"}) {
    EXPECT_TRUE(is_quantity(ok)) << ok;
  }
  for (const char* bad :
       {"", "Gi", "8 gigs", "1.2.3", "1GB", "e3", "1e", "--1", "1ki", "-1", "-0.5Gi", "-0"}) {
    EXPECT_FALSE(is_quantity(bad)) << bad;
  }
}

TEST(DnsLabel, FollowsRfc1123) {
  EXPECT_TRUE(is_dns_label("rljob-tiny"));
  EXPECT_TRUE(is_dns_label("a1"));
  EXPECT_FALSE(is_dns_label("-a"));
  EXPECT_FALSE(is_dns_label("a-"));
  EXPECT_FALSE(is_dns_label("A"));
  EXPECT_FALSE(is_dns_label("a_b"));
  EXPECT_FALSE(is_dns_label(std::string(64, 'a')));
  EXPECT_TRUE(is_dns_label(std::string(63, 'a')));
}

TEST(UrlPath, DotSegmentsAndEncodedSlashesRefused) {
  for (const char* url :
       {"http://h/v1/score/../../admin", "http://h/v1/score/%2e%2e/admin", "http://h/v1/%2E%2E/x",
        "http://h/v1/score/./x", "http://h/..", "http://h/.", "http://h/v1/%2e.#x",
        "http://h/v1/.%2E?x", "http://h/a/..;jsessionid=1/b"}) {
    EXPECT_NE(url_path_problem(url).find("segment in its path"), std::string::npos) << url;
  }
  for (const char* url : {"http://h/a%2fb", "http://h/a%2F..", "http://h/a%5Cb", "http://h/a\\b",
                          "http://h\\@evil/x"}) {
    EXPECT_NE(url_path_problem(url).find("encoded slash or a backslash"), std::string::npos) << url;
  }
  for (const char* url :
       {"http://h", "http://h/", "http://h/v1/score", "http://h/.../x", "http://h/a.b/..c/c..",
        "http://h/%2e%2e%2e", "http://h/%2ex", "http://h/v1?x=/../..", "http://h/v1#/../",
        "http://h/v1?p=%2f", "http://h/a%2", "http://h/a%"}) {
    EXPECT_EQ(url_path_problem(url), "") << url;
  }
}

TEST(NearestName, SuggestsTyposOnly) {
  std::vector<std::string> names{"replicas", "resources", "podTemplate"};
  EXPECT_EQ(nearest_name("replica", names), "replicas");
  EXPECT_EQ(nearest_name("Replicas", names), "replicas");
  EXPECT_EQ(nearest_name("podtemplate", names), "podTemplate");
  EXPECT_EQ(nearest_name("gpus", names), "");
  EXPECT_EQ(nearest_name("x", {}), "");
}

}  // namespace
}  // namespace tlt::api
