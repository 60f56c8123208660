// CompareDashboard: the compare view (`stallscope ui A.db B.db`), two recordings in one window,
// A above B, on one time axis:
//
//   +----------------------------------------------------------------------------------+
//   | tune DIR: a row per run (settings, samples/s, stall, status); A and B badged      |  table (ui DIR)
//   +----------------------------------------------------------------------------------+
//   | compare: A's and B's samples/s, stall, step p50, loader   | compare()'s verdict  |  strip
//   +----------------------------------------------------------------------------------+
//   | [A] header, headline, timeline, queue, workers | recommendations, batch           |  half
//   +----------------------------------------------------------------------------------+
//   | [B] the same panels                                                              |  half
//   +----------------------------------------------------------------------------------+
//
// Each half is a Dashboard of its own, drawn from its own snapshot source with the panel table's
// compact heights; each keeps its own ViewState (hovered and pinned batch, heat metric, highlighted
// lane) and geometry. The time axis is one: the visible span, the playhead, play/pause, speed,
// following and the live width are kept here, measured from each run's origin, its training-window
// start (the first dl.next), and written into both sides' ViewStates before they draw; whatever a
// side's panels change (wheel zoom, drag, fit, the scrub bar, a click on a recommendation) is read
// back after it drew, so it moves both. Step 100 of A therefore sits above step 100 of B when the
// runs go at the same speed, and the faster one visibly pulls ahead.
//
// Stacked rather than side by side: one axis above the other makes the same x the same time since
// each run's start, so drift reads at a glance; two 800 px columns would leave each timeline ~480
// px of time axis (less its label and side columns) and the eye to match times across the window.
#pragma once

#include <imgui.h>

#include <memory>
#include <optional>
#include <utility>

#include "analysis/compare.h"
#include "ui/dashboard.h"
#include "ui/tune_set.h"

namespace stallscope::ui {

class CompareDashboard {
 public:
  explicit CompareDashboard(UiFonts fonts = {});

  // One frame of the two recordings, filling the display. `dump` (optional) receives the strip's
  // figures and verdict and, in dump->sides, each side's own layout.
  void draw(const Snapshot& a, const Snapshot& b, LayoutDump* dump = nullptr);

  // The shared axis, in ns from each run's origin: the visible range (stops following) and the
  // playhead (replay; negative: before the training started).
  void set_range(double t0, double t1);
  std::pair<double, double> range() const { return {axis_.t0 - kAxisZero, axis_.t1 - kAxisZero}; }
  void set_playhead(double t) { axis_.playhead = t + kAxisZero; }
  // Play/pause, speed, follow, live width: the shared ViewState (its times are axis coordinates).
  ViewState& axis() { return axis_; }

  Dashboard& side(int i) { return sides_[i].dash; }
  // Side i's origin in the last frame, ns since its session start.
  double origin(int i) const { return sides_[i].origin; }
  // compare()'s result once both analyses ran.
  const analysis::Comparison* comparison() const { return comparison_ ? &*comparison_ : nullptr; }
  double strip_ms() const { return strip_ms_; }  // the last frame's strip (the sides time their panels)

  // A `stallscope tune` folder (`stallscope ui DIR`): its table above the strip, run `b` of it
  // shown as B (its baseline is A).
  void set_tune(TuneSet set, int b);
  const TuneSet* tune() const { return tune_ ? &*tune_ : nullptr; }
  int tune_b() const { return tune_b_; }
  // The run clicked in the table since the last call: the app opens it as B, then set_tune_b().
  std::optional<int> take_pick() { return std::exchange(pick_, std::nullopt); }
  // B now shows run `b` of the set: side B forgets its run (hovered and pinned batch, geometry,
  // figures) and the shared axis stays where it is.
  void set_tune_b(int b);

  void keep_geometry(bool on);
  const UiFonts& fonts() const { return fonts_; }
  void set_fonts(const UiFonts& f);

  // The shared axis counts from a point this far before both runs' origins, so that its times are
  // never negative and the playhead's -1 ("at the end") keeps its meaning in advance_clock().
  // Doubles there are exact to an eighth of a nanosecond.
  static constexpr double kAxisZero = 1e15;  // ns (~11.6 days)

 private:
  struct Side {
    Dashboard dash;
    double origin = 0;
    // The timeline first_next was looked for in (held: a bare address could be a newer one's).
    std::shared_ptr<const Timeline> scanned;
    std::optional<int64_t> first_next;             // its first dl.next of the training loop
    std::shared_ptr<const AnalysisView> analysed;  // the analysis `figures` come from
    std::optional<analysis::CompareSide> figures;
  };
  double origin_of(const Snapshot& s, Side& side);
  void update_comparison(const Snapshot& a, const Snapshot& b);

  UiFonts fonts_;
  Side sides_[2];
  ViewState axis_;
  std::optional<analysis::Comparison> comparison_;
  double strip_ms_ = 0;
  bool keep_geometry_ = true;
  std::optional<TuneSet> tune_;
  int tune_b_ = 0;
  std::optional<int> pick_;
};

}  // namespace stallscope::ui
