// AppendLog<T>: an append-only array whose copies share storage, so that the snapshot thread can
// publish a new immutable snapshot of a growing timeline without copying what was already there.
//
// Storage is a list of chunks of geometric size (kBase, 2 kBase, 4 kBase, ...): index i lives in
// chunk k = floor(log2(i / kBase + 1)), so access is O(1) and the waste is under half. A copy
// holds the chunk pointers and its own size. The one writer (the builder) appends into the unused
// tail of the last chunk: readers of older copies never read past their own size, so they never
// see a slot being written (the publishing atomic store orders the writes before the new size).
//
// Rules: one writer; never modify an element below a size that was published (rebuild into a
// fresh log instead, which allocates new chunks).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace stallscope::ui {

// For a lower_bound over a block index (the key of every kBlock-th item): given blocks[b] < t,
// gallops from block b and returns the range [first, last) of block indices that holds the first
// block whose key is >= t (last may be blocks.size(): no such block). The index is small enough to
// stay in cache, where a gallop over the items themselves touches far-apart lines.
template <typename Index>
std::pair<size_t, size_t> gallop_blocks(const Index& blocks, size_t b, int64_t t) {
  const size_t nb = blocks.size();
  size_t prev = b, step = 1, cur = b + 1;
  while (cur < nb && blocks[cur] < t) {
    prev = cur;
    step *= 2;
    cur = prev + step;
  }
  return {prev + 1, cur < nb ? cur : nb};
}

template <typename T>
class AppendLog {
 public:
  static constexpr size_t kBase = 64;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  const T& operator[](size_t i) const {
    assert(i < size_);
    const size_t j = i / kBase + 1;
    const unsigned k = 63u - static_cast<unsigned>(__builtin_clzll(j));
    return chunks_[k][i - kBase * ((size_t{1} << k) - 1)];
  }
  const T& back() const { return (*this)[size_ - 1]; }
  const T& front() const { return (*this)[0]; }

  void push_back(const T& v) {
    const size_t j = size_ / kBase + 1;
    const unsigned k = 63u - static_cast<unsigned>(__builtin_clzll(j));
    if (k == chunks_.size()) chunks_.emplace_back(new T[kBase << k]);  // default-init: no zeroing
    chunks_[k][size_ - kBase * ((size_t{1} << k) - 1)] = v;
    ++size_;
  }

  // Forgets everything; later appends go to new chunks (copies keep the old ones).
  void reset() {
    chunks_.clear();
    size_ = 0;
  }

  // First index in [lo, hi) for which `less(element, key)` is false (std::lower_bound).
  template <typename K, typename Less>
  size_t lower_bound(size_t lo, size_t hi, const K& key, Less less) const {
    size_t n = hi - lo;
    while (n > 0) {
      const size_t half = n / 2;
      if (less((*this)[lo + half], key)) {
        lo += half + 1;
        n -= half + 1;
      } else {
        n = half;
      }
    }
    return lo;
  }

 private:
  std::vector<std::shared_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

// An AppendLog sorted by an int64 key. The keys are also kept apart (8 bytes each) with a block
// index (the key of the last element of every kBlock), and lower_bound gallops from a hint: the
// searches a frame makes (every few pixels, left to right) touch a handful of nearby cache lines
// instead of ~log2(n) scattered ones. This is what keeps a zoomed-out frame cheap over rows of
// millions of items.
template <typename T, int64_t (*Key)(const T&)>
class SortedLog {
 public:
  static constexpr size_t kBlock = 64;

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const T& operator[](size_t i) const { return items_[i]; }
  const T& back() const { return items_.back(); }
  int64_t key(size_t i) const { return keys_[i]; }

  // The caller keeps keys non-decreasing.
  void push_back(const T& v) {
    const int64_t k = Key(v);
    items_.push_back(v);
    keys_.push_back(k);
    if (items_.size() % kBlock == 0) blocks_.push_back(k);
  }
  void reset() {
    items_.reset();
    keys_.reset();
    blocks_.reset();
  }

  // First index >= lo whose key is >= t. Cheapest when the answer is near lo.
  size_t lower_bound(int64_t t, size_t lo = 0) const {
    const size_t n = items_.size();
    if (lo >= n) return n;
    const size_t nb = blocks_.size();
    size_t b = lo / kBlock;
    if (b < nb && blocks_[b] < t) {
      const auto [first, last] = gallop_blocks(blocks_, b, t);  // the first block whose last key is >= t
      b = blocks_.lower_bound(first, last, t, [](int64_t k, int64_t x) { return k < x; });
    }
    const size_t from = lo > b * kBlock ? lo : b * kBlock;
    const size_t to = b < nb ? (b + 1) * kBlock : n;
    return keys_.lower_bound(from, to, t, [](int64_t k, int64_t x) { return k < x; });
  }

 private:
  AppendLog<T> items_;
  AppendLog<int64_t> keys_;
  AppendLog<int64_t> blocks_;
};

}  // namespace stallscope::ui
