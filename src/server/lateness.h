// Lateness of timed deliveries, as the server sees it: for a reserve that
// was waiting when its job fell due, the time from the job's run_at to the
// moment its delivery is written to the worker. It is what "punctual" means
// (SPEC §4), measured where the server can vouch for it, and it is reported
// in STATS, /v1/stats and /metrics.
//
// A log-linear histogram: 8 sub-buckets per power of two of microseconds,
// so a percentile is exact to within 12.5%. Recording is a few
// instructions; there is no allocation after construction.
//
// Thread-safety: none; the loop thread owns it.
#ifndef DELAYQ_SERVER_LATENESS_H_
#define DELAYQ_SERVER_LATENESS_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

namespace delayq::server {

class LatenessHistogram {
 public:
  void Record(int64_t us) {
    uint64_t v = us < 0 ? 0 : static_cast<uint64_t>(us);
    ++buckets_[Bucket(v)];
    ++count_;
    sum_us_ += v;
    max_us_ = std::max(max_us_, v);
  }

  uint64_t count() const { return count_; }
  uint64_t sum_us() const { return sum_us_; }
  uint64_t max_us() const { return max_us_; }

  // The q-quantile (0 < q <= 1), as the upper bound of its bucket (never
  // above the largest value recorded). 0 when nothing was recorded.
  uint64_t QuantileUs(double q) const {
    if (count_ == 0) return 0;
    uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_) + 0.5);
    rank = std::clamp<uint64_t>(rank, 1, count_);
    uint64_t seen = 0;
    for (size_t b = 0; b < kBuckets; ++b) {
      seen += buckets_[b];
      if (seen >= rank) return std::min(UpperBound(b), max_us_);
    }
    return max_us_;
  }

  // How many recorded values are <= us (for Prometheus buckets; counts whole
  // histogram buckets, so it is exact at bucket bounds).
  uint64_t CountAtMost(uint64_t us) const {
    uint64_t n = 0;
    for (size_t b = 0; b < kBuckets && UpperBound(b) <= us; ++b) n += buckets_[b];
    return n;
  }

 private:
  static constexpr int kSubBits = 3;  // 8 sub-buckets per power of two
  static constexpr size_t kBuckets = (64 - kSubBits + 1) << kSubBits;

  // Values below 2^kSubBits have a bucket each; above, the bucket is the
  // power of two and the next kSubBits bits.
  static size_t Bucket(uint64_t v) {
    if (v < (1u << kSubBits)) return static_cast<size_t>(v);
    int top = 63 - std::countl_zero(v);  // >= kSubBits
    int shift = top - kSubBits;
    uint64_t sub = (v >> shift) & ((1u << kSubBits) - 1);
    return (static_cast<size_t>(shift + 1) << kSubBits) + sub;
  }
  static uint64_t UpperBound(size_t b) {
    if (b < (1u << kSubBits)) return b;
    int shift = static_cast<int>(b >> kSubBits) - 1;
    uint64_t sub = b & ((1u << kSubBits) - 1);
    uint64_t low = ((uint64_t{1} << kSubBits) + sub) << shift;
    return low + (uint64_t{1} << shift) - 1;
  }

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t sum_us_ = 0;
  uint64_t max_us_ = 0;
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_LATENESS_H_
