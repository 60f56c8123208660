// The order of an epoch: which samples this rank reads, in which order, cut into batches; and the
// progress through epochs that state_dict()/load_state_dict() save and restore.
//
// Order. With shuffle, epoch e is a Fisher–Yates permutation of 0..N-1 drawn from
// Rng(sample_seed(seed, e, -1)); without, 0..N-1. Every rank computes the same permutation; rank r
// of W takes positions r, r+W, r+2W, ..., so across ranks each index appears exactly once per
// epoch. Shards may differ in length by one sample (torch's DistributedSampler pads them with
// repeated samples instead; that would break "each index once"). The shard is cut into batches of
// batch_size; drop_last drops a last, shorter batch.
//
// Progress, as torch's DataLoader with a sampler whose set_epoch() one calls: each begin_epoch()
// runs the next epoch (0, 1, 2, ...); set_epoch(e) makes the next one e. A state is (epoch, batches
// of it the training loop has received) with the settings that fix the order: loaded into a loader
// of the same settings, the next begin_epoch() continues that epoch after those batches, in the
// same order; a state saved after the last batch of an epoch continues with the next epoch.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "loader/source.h"

namespace stallscope::loader {

// What fixes the order of every epoch.
struct SamplerOptions {
  int64_t dataset_len = 0;
  int64_t batch_size = 1;
  bool shuffle = false;
  uint64_t seed = 0;
  bool drop_last = false;
  int64_t rank = 0;
  int64_t world_size = 1;

  bool operator==(const SamplerOptions&) const = default;
  // A hash of every field: a state names the settings it belongs to.
  uint64_t fingerprint() const;
  // "batch_size=32 shuffle=true seed=0 ..." for messages.
  std::string describe() const;
};

// What state_dict() saves: the position of the next batch the training loop will receive.
struct SamplerState {
  int64_t epoch = 0;           // the epoch that batch belongs to
  int64_t batches_handed = 0;  // batches of that epoch the training loop has received
  SamplerOptions options;      // the settings the state was saved with
  uint64_t fingerprint = 0;    // options.fingerprint() when saved
};

// One epoch's plan for this rank.
struct EpochPlan {
  int64_t epoch = 0;
  int64_t first_batch = 0;  // batches before it were received before a resume
  int64_t num_batches = 0;  // of the whole epoch
  int64_t batch_size = 1;
  std::vector<int64_t> indices;  // this rank's samples in order (the whole epoch's)
  // Batch b's samples (0 <= b < num_batches).
  std::span<const int64_t> batch(int64_t b) const;
};

class Sampler {
 public:
  // Refuses impossible settings (negative length, batch_size < 1, rank outside the world) with a
  // one-line reason.
  static Result<Sampler> create(const SamplerOptions& options);

  const SamplerOptions& options() const { return o_; }
  int64_t shard_size() const;         // samples this rank reads per epoch
  int64_t batches_per_epoch() const;  // batches this rank yields per epoch
  // This rank's samples of `epoch` in order.
  std::vector<int64_t> epoch_indices(int64_t epoch) const;

  // The epoch the next begin_epoch() runs; its resume offset is kept when `epoch` is the epoch a
  // loaded state stopped in, dropped otherwise.
  void set_epoch(int64_t epoch);
  // Starts the next epoch (after a loaded state: the rest of the state's epoch).
  EpochPlan begin_epoch();
  // The training loop has now received `batches` batches (counted from 0) of the epoch in progress.
  void handed(int64_t batches);
  SamplerState state() const;
  // Takes a state saved with the same options; otherwise a one-line reason naming the first
  // setting that differs.
  Status load_state(const SamplerState& state);

 private:
  explicit Sampler(const SamplerOptions& o) : o_(o) {}
  SamplerOptions o_;
  int64_t next_epoch_ = 0, skip_ = 0;  // what begin_epoch() runs next
  int64_t current_ = -1, handed_ = 0;  // the epoch in progress (-1: none) and batches received
};

// Fisher–Yates shuffle of `v` with `rng` (i from the end down to 1, swap with below(i + 1)):
// written out because std::shuffle's draws differ between standard libraries.
void shuffle(std::vector<int64_t>& v, Rng& rng);

}  // namespace stallscope::loader
