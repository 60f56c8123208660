// Epoch order, sharding, batching and resume state; see sampler.h.
#include "loader/sampler.h"

#include <algorithm>
#include <numeric>

namespace stallscope::loader {

uint64_t SamplerOptions::fingerprint() const {
  // FNV-1a over the fields' bytes, then splitmix's finaliser: stable across builds and platforms.
  uint64_t h = 0xCBF29CE484222325ull;
  auto add = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  };
  add(static_cast<uint64_t>(dataset_len));
  add(static_cast<uint64_t>(batch_size));
  add(shuffle ? 1 : 0);
  add(seed);
  add(drop_last ? 1 : 0);
  add(static_cast<uint64_t>(rank));
  add(static_cast<uint64_t>(world_size));
  return sample_seed(h, 0, 0);
}

std::string SamplerOptions::describe() const {
  return "dataset_len=" + std::to_string(dataset_len) + " batch_size=" + std::to_string(batch_size) +
         " shuffle=" + (shuffle ? "true" : "false") + " seed=" + std::to_string(seed) +
         " drop_last=" + (drop_last ? "true" : "false") + " rank=" + std::to_string(rank) +
         " world_size=" + std::to_string(world_size);
}

std::span<const int64_t> EpochPlan::batch(int64_t b) const {
  const size_t begin = static_cast<size_t>(b * batch_size);
  const size_t end = std::min(indices.size(), begin + static_cast<size_t>(batch_size));
  return std::span<const int64_t>(indices).subspan(begin, end - begin);
}

void shuffle(std::vector<int64_t>& v, Rng& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.below(i));
    std::swap(v[i - 1], v[j]);
  }
}

Result<Sampler> Sampler::create(const SamplerOptions& o) {
  if (o.dataset_len < 0) return Status::Error("dataset length " + std::to_string(o.dataset_len) + " is negative");
  if (o.batch_size < 1) return Status::Error("batch_size must be at least 1, not " + std::to_string(o.batch_size));
  if (o.world_size < 1) return Status::Error("world_size must be at least 1, not " + std::to_string(o.world_size));
  if (o.rank < 0 || o.rank >= o.world_size) {
    return Status::Error("rank " + std::to_string(o.rank) + " is outside world_size " + std::to_string(o.world_size));
  }
  return Sampler(o);
}

int64_t Sampler::shard_size() const {
  if (o_.dataset_len <= o_.rank) return 0;
  return (o_.dataset_len - o_.rank + o_.world_size - 1) / o_.world_size;
}

int64_t Sampler::batches_per_epoch() const {
  const int64_t n = shard_size();
  return o_.drop_last ? n / o_.batch_size : (n + o_.batch_size - 1) / o_.batch_size;
}

std::vector<int64_t> Sampler::epoch_indices(int64_t epoch) const {
  std::vector<int64_t> all(static_cast<size_t>(o_.dataset_len));
  std::iota(all.begin(), all.end(), int64_t{0});
  if (o_.shuffle) {
    Rng rng(sample_seed(o_.seed, epoch, -1));
    shuffle(all, rng);
  }
  if (o_.world_size == 1) return all;
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(shard_size()));
  for (int64_t p = o_.rank; p < o_.dataset_len; p += o_.world_size) mine.push_back(all[static_cast<size_t>(p)]);
  return mine;
}

void Sampler::set_epoch(int64_t epoch) {
  if (epoch != next_epoch_) skip_ = 0;
  next_epoch_ = epoch;
}

EpochPlan Sampler::begin_epoch() {
  EpochPlan plan;
  plan.epoch = next_epoch_;
  plan.first_batch = std::min(skip_, batches_per_epoch());
  plan.num_batches = batches_per_epoch();
  plan.batch_size = o_.batch_size;
  plan.indices = epoch_indices(plan.epoch);
  if (o_.drop_last) plan.indices.resize(static_cast<size_t>(plan.num_batches * o_.batch_size));
  current_ = plan.epoch;
  handed_ = plan.first_batch;
  next_epoch_ = plan.epoch + 1;
  skip_ = 0;
  return plan;
}

void Sampler::handed(int64_t batches) {
  if (current_ >= 0) handed_ = std::max(handed_, batches);
}

SamplerState Sampler::state() const {
  SamplerState s;
  s.options = o_;
  s.fingerprint = o_.fingerprint();
  if (current_ >= 0 && handed_ < batches_per_epoch()) {
    s.epoch = current_;
    s.batches_handed = handed_;
  } else {
    s.epoch = next_epoch_;
    s.batches_handed = skip_;
  }
  return s;
}

Status Sampler::load_state(const SamplerState& s) {
  const SamplerOptions& a = s.options;
  auto differs = [](const char* what, auto saved, auto mine) {
    return Status::Error("cannot resume: the state was saved with " + std::string(what) + "=" + std::to_string(saved) +
                         ", this loader has " + what + "=" + std::to_string(mine));
  };
  if (a.dataset_len != o_.dataset_len) return differs("dataset_len", a.dataset_len, o_.dataset_len);
  if (a.batch_size != o_.batch_size) return differs("batch_size", a.batch_size, o_.batch_size);
  if (a.shuffle != o_.shuffle) return differs("shuffle", int{a.shuffle}, int{o_.shuffle});
  if (a.seed != o_.seed) return differs("seed", a.seed, o_.seed);
  if (a.drop_last != o_.drop_last) return differs("drop_last", int{a.drop_last}, int{o_.drop_last});
  if (a.rank != o_.rank) return differs("rank", a.rank, o_.rank);
  if (a.world_size != o_.world_size) return differs("world_size", a.world_size, o_.world_size);
  if (s.fingerprint != o_.fingerprint()) {
    return Status::Error("cannot resume: the state's fingerprint does not match its settings (" + a.describe() + ")");
  }
  if (s.epoch < 0 || s.batches_handed < 0 || s.batches_handed > batches_per_epoch()) {
    return Status::Error("cannot resume: epoch " + std::to_string(s.epoch) + " with " +
                         std::to_string(s.batches_handed) + " batches received is not a position of this loader (" +
                         std::to_string(batches_per_epoch()) + " batches per epoch)");
  }
  current_ = -1;
  handed_ = 0;
  next_epoch_ = s.epoch;
  skip_ = s.batches_handed;
  if (skip_ > 0 && skip_ == batches_per_epoch()) {  // saved after the epoch's last batch: the next epoch
    ++next_epoch_;
    skip_ = 0;
  }
  return Status::Ok();
}

}  // namespace stallscope::loader
