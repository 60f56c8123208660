// GeometryCache: what a piece of a view drew (vertices and indices) for a given key — the data it
// drew, the visible time range, its place on screen and whatever else changes the picture — kept
// across frames and replayed while the key stays the same, instead of being computed again.
//
// The costly part of a zoomed-out frame is finding what to draw (searches over rows of millions of
// items, min/max and means per pixel column), not submitting it. Most frames change nothing of
// that: the mouse moves over the timeline (hover, tooltips, the batch under the pointer) while
// the range stays put. Those frames replay the stored geometry; a pan or zoom changes the key and
// recomputes. Everything is forgotten when the snapshot's data change.
//
// Only geometry that stayed within one draw command is stored (no clip rectangle pushed, no new
// vertex offset); anything else is simply drawn again next frame. Render thread only.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace stallscope::ui {

class GeometryCache {
 public:
  struct Key {
    const void* what = nullptr;  // the data drawn (a row, a series); one entry per `what`
    double t0 = 0, t1 = 0;       // the visible time range
    float x0 = 0, x1 = 0, y0 = 0, y1 = 0;
    double a = 0, b = 0;  // anything else that changes the picture (scale, dimming, ...)
    bool operator==(const Key&) const = default;
  };

  // Call once per frame with what identifies the data drawn: a change forgets every entry.
  void new_frame(const void* data, const void* more = nullptr);

  // Appends the geometry stored for `k` to `dl` and returns the result stored with it; or, when
  // there is none, calls build() (which draws into `dl` and returns a count), stores what it drew
  // and returns its result.
  template <typename Build>
  int64_t draw(ImDrawList* dl, const Key& k, Build&& build) {
    if (const Entry* e = find(k)) {
      replay(dl, *e);
      return e->result;
    }
    const Mark m = mark(dl);
    const int64_t r = build();
    store(dl, k, m, r);
    return r;
  }

  // Values computed for `k` (a view's per-cell figures): the stored vector when the key matches
  // (*fresh = false), else an empty one to fill (*fresh = true).
  std::vector<double>& values(const Key& k, bool* fresh);

  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  struct Entry {
    Key key;
    std::vector<ImDrawVert> vtx;
    std::vector<ImDrawIdx> idx;  // relative to the first vertex
    int64_t result = 0;
  };
  struct Mark {
    int cmds = 0, vtx = 0, idx = 0;
    unsigned base = 0;
  };
  const Entry* find(const Key& k);
  static Mark mark(const ImDrawList* dl);
  void store(const ImDrawList* dl, const Key& k, const Mark& m, int64_t result);
  static void replay(ImDrawList* dl, const Entry& e);

  const void* data_ = nullptr;
  const void* more_ = nullptr;
  std::unordered_map<const void*, Entry> entries_;
  std::unordered_map<const void*, std::pair<Key, std::vector<double>>> values_;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace stallscope::ui
