// runtime/device/busy.h: the busy share's arithmetic over samples, a meter over a fake source
// (its own clock and samples), and the NVML loader where the library is absent or is not NVML.
#include "runtime/device/busy.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace tlt::device {
namespace {

TEST(BusyShare, WeighsEachSampleByThePartOfItsPeriodInsideTheInterval) {
  // Periods (0,100] 50%, (100,200] 100%, (200,300] 0%; interval [50, 250].
  std::vector<UtilizationSample> s = {{100, 0.5}, {200, 1.0}, {300, 0.0}};
  std::optional<double> r = busy_share(s, 0, 50, 250);
  ASSERT_TRUE(r.has_value());
  // 50 us at 0.5, 100 at 1.0, 50 at 0.0 over 200 covered.
  EXPECT_DOUBLE_EQ(*r, (25.0 + 100.0 + 0.0) / 200.0);
}

TEST(BusyShare, TheTailNotYetSampledIsLeftOut) {
  // Interval [0, 1000], samples only up to 400: the share is over the 400 us covered.
  std::vector<UtilizationSample> s = {{200, 1.0}, {400, 0.5}};
  std::optional<double> r = busy_share(s, 0, 0, 1000);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(*r, 0.75);
}

TEST(BusyShare, NothingCoversTheIntervalMeansNoShare) {
  EXPECT_FALSE(busy_share({}, 0, 0, 100).has_value());
  // Every sample before the interval.
  EXPECT_FALSE(busy_share({{50, 1.0}, {90, 1.0}}, 0, 100, 200).has_value());
  // An empty interval.
  EXPECT_FALSE(busy_share({{150, 1.0}}, 0, 100, 100).has_value());
}

TEST(BusyShare, ClampsValuesAndSkipsSamplesOutOfOrder) {
  std::vector<UtilizationSample> s = {{100, 2.0}, {80, 0.0}, {200, -1.0}};
  std::optional<double> r = busy_share(s, 0, 0, 200);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(*r, 0.5);  // (0,100] at 1 (clamped), (100,200] at 0 (clamped); 80 skipped
}

// A source with a settable clock and a list of samples.
struct FakeSource : UtilizationSource {
  uint64_t now = 0;
  std::vector<UtilizationSample> all;
  bool fail = false;
  uint64_t now_us() override { return now; }
  StatusOr<std::vector<UtilizationSample>> samples_after(uint64_t after) override {
    if (fail) return Status::Unavailable("fake source down");
    std::vector<UtilizationSample> out;
    for (const UtilizationSample& s : all)
      if (s.time_us > after && s.time_us <= now) out.push_back(s);
    return out;
  }
};

TEST(BusyMeter, MeasuresFromTheNewestSampleBeforeBegin) {
  auto src = std::make_unique<FakeSource>();
  FakeSource* f = src.get();
  // Samples every 100 us: idle before 1000, 80% busy after.
  for (uint64_t t = 100; t <= 1000; t += 100) f->all.push_back({t, 0.0});
  for (uint64_t t = 1100; t <= 3000; t += 100) f->all.push_back({t, 0.8});
  BusyMeter m(std::move(src));
  f->now = 1000;
  m.begin();
  f->now = 2000;
  std::optional<double> r = m.end();
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR(*r, 0.8, 1e-12);
  // A second interval spanning the change: [950, 1050] is half idle, half busy.
  f->now = 950;
  m.begin();
  f->now = 1050;
  // Samples up to 1050 exist: (900,1000] idle and nothing past 1000 yet within (1000,1050].
  r = m.end();
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR(*r, 0.0, 1e-12);  // only the covered 50 us count: the GPU was idle then
  f->now = 1100;
  m.begin();  // begins at 1100, the newest sample is 1100
  f->now = 1120;
  EXPECT_FALSE(m.end().has_value());  // shorter than a sample period: no sample covers it
}

TEST(BusyMeter, NoShareWithoutBeginOrWhenTheSourceFails) {
  auto src = std::make_unique<FakeSource>();
  FakeSource* f = src.get();
  f->all = {{100, 1.0}, {200, 1.0}};
  BusyMeter m(std::move(src));
  EXPECT_FALSE(m.end().has_value());
  f->now = 0;
  m.begin();
  f->now = 200;
  f->fail = true;
  EXPECT_FALSE(m.end().has_value());
}

TEST(Nvml, AnAbsentLibraryIsNotFound) {
  StatusOr<std::unique_ptr<UtilizationSource>> s =
      open_nvml("00000000:3B:00.0", "libtlt-no-such-nvml.so.1");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("libtlt-no-such-nvml.so.1"), std::string::npos);
}

TEST(Nvml, ALibraryWithoutNvmlsEntryPointsIsRefused) {
  StatusOr<std::unique_ptr<UtilizationSource>> s = open_nvml("00000000:3B:00.0", "libm.so.6");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("nvmlInit_v2"), std::string::npos);
}

TEST(Nvml, TheCpuHasNoMeterAndSaysWhy) {
  std::string why;
  EXPECT_EQ(busy_meter_for("cpu", &why), nullptr);
  EXPECT_NE(why.find("clock"), std::string::npos);
}

}  // namespace
}  // namespace tlt::device
