// Relative-error quantile sketch; see sketch.h.
#include "common/sketch.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace stallscope {
namespace {

const double kGamma = (1 + DurationSketch::kRelativeError) / (1 - DurationSketch::kRelativeError);
const double kLogGamma = std::log(kGamma);

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

bool get_varint(std::string_view& in, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    const auto byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

uint64_t zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
int64_t unzigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

}  // namespace

const int32_t DurationSketch::kMaxBin = DurationSketch::bin_of(std::numeric_limits<int64_t>::max());

int32_t DurationSketch::bin_of(int64_t value) {
  if (value <= 0) return kZeroBin;
  // 1 ns is bin 0; int64's largest value is bin ~2,200.
  return static_cast<int32_t>(std::ceil(std::log(static_cast<double>(value)) / kLogGamma - 1e-9));
}

void DurationSketch::add_bin(int32_t bin, uint64_t n) {
  if (n == 0) return;
  count_ += n;
  if (bin == kZeroBin) {
    zeros_ += n;
    return;
  }
  bin = std::clamp(bin, 0, kMaxBin);
  if (bins_.empty()) {
    lo_ = bin;
    bins_.assign(1, 0);
  } else if (bin < lo_) {
    bins_.insert(bins_.begin(), static_cast<size_t>(lo_ - bin), 0);
    lo_ = bin;
  } else if (static_cast<size_t>(bin - lo_) >= bins_.size()) {
    bins_.resize(static_cast<size_t>(bin - lo_) + 1, 0);
  }
  bins_[static_cast<size_t>(bin - lo_)] += n;
}

void DurationSketch::merge(const DurationSketch& other) {
  add_bin(kZeroBin, other.zeros_);
  for (size_t k = 0; k < other.bins_.size(); ++k) add_bin(other.lo_ + static_cast<int32_t>(k), other.bins_[k]);
}

int64_t DurationSketch::quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(std::isnan(q) ? 0.0 : q, 0.0, 1.0);
  const auto rank = static_cast<uint64_t>(std::floor(q * static_cast<double>(count_ - 1)));
  uint64_t seen = zeros_;
  if (seen > rank) return 0;
  for (size_t k = 0; k < bins_.size(); ++k) {
    seen += bins_[k];
    if (seen > rank) {
      const double v = 2 * std::exp((lo_ + static_cast<double>(k)) * kLogGamma) / (kGamma + 1);
      return v >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(std::llround(v));
    }
  }
  return 0;  // not reached: the counts add up to count_
}

std::string DurationSketch::encode() const {
  std::string out;
  int64_t prev = 0;
  if (zeros_) {
    put_varint(out, zigzag(static_cast<int64_t>(kZeroBin)));
    put_varint(out, zeros_);
    prev = kZeroBin;
  }
  for (size_t k = 0; k < bins_.size(); ++k) {
    if (!bins_[k]) continue;
    const int64_t bin = lo_ + static_cast<int64_t>(k);
    put_varint(out, zigzag(bin - prev));
    put_varint(out, bins_[k]);
    prev = bin;
  }
  return out;
}

Result<DurationSketch> DurationSketch::decode(std::string_view in) {
  DurationSketch s;
  int64_t prev = 0;
  bool first = true;
  while (!in.empty()) {
    uint64_t delta = 0, n = 0;
    if (!get_varint(in, delta) || !get_varint(in, n)) return Status::Error("a quantile sketch is cut short");
    const __int128 wide = static_cast<__int128>(prev) + unzigzag(delta);
    if (wide < INT32_MIN || wide > INT32_MAX) return Status::Error("a quantile sketch is damaged");
    const auto bin = static_cast<int64_t>(wide);
    if ((bin != kZeroBin && (bin < 0 || bin > kMaxBin)) || (!first && bin <= prev) || n == 0 ||
        s.count_ + n < s.count_) {
      return Status::Error("a quantile sketch is damaged");
    }
    s.add_bin(static_cast<int32_t>(bin), n);
    prev = bin;
    first = false;
  }
  return s;
}

}  // namespace stallscope
