// The dashboard's palette: the background, panel, grid and text colours every view shares, one
// colour per item style, marker kind and lane role (so a fetch is the same blue on the timeline,
// in the batch bar and in a lane's label), and the two colour operations the views need (mixing
// towards another colour, replacing the alpha). Header-only: constants and small lookups.
#pragma once

#include <imgui.h>

#include <algorithm>
#include <cstdint>

#include "ui/snapshot.h"

namespace stallscope::ui {

inline constexpr ImU32 kBackground = IM_COL32(24, 26, 31, 255);
inline constexpr ImU32 kPanelBg = IM_COL32(32, 35, 41, 255);
inline constexpr ImU32 kGrid = IM_COL32(255, 255, 255, 22);
inline constexpr ImU32 kText = IM_COL32(225, 228, 235, 255);
inline constexpr ImU32 kTextDim = IM_COL32(150, 156, 168, 255);
inline constexpr ImU32 kAccent = IM_COL32(95, 175, 255, 255);
inline constexpr ImU32 kGood = IM_COL32(90, 200, 120, 255);
inline constexpr ImU32 kWarn = IM_COL32(240, 170, 60, 255);
inline constexpr ImU32 kBad = IM_COL32(235, 85, 80, 255);
// The compare view's two recordings: their badges in the headers and rows in the comparison strip.
inline constexpr ImU32 kSideA = kAccent;
inline constexpr ImU32 kSideB = IM_COL32(190, 150, 255, 255);

inline ImU32 style_color(Style s) {
  switch (s) {
    case Style::kNext: return IM_COL32(226, 92, 82, 255);
    case Style::kStep: return IM_COL32(78, 168, 108, 255);
    case Style::kFetch: return IM_COL32(74, 138, 222, 255);
    case Style::kCollate: return IM_COL32(118, 194, 236, 255);
    case Style::kPin: return IM_COL32(168, 120, 222, 255);
    case Style::kCudaSync: return IM_COL32(232, 152, 58, 255);
    case Style::kNvtx: return IM_COL32(122, 150, 162, 255);
    case Style::kKernel: return IM_COL32(104, 196, 120, 255);
    case Style::kCopyPinned: return IM_COL32(64, 182, 192, 255);
    case Style::kCopyPageable: return IM_COL32(244, 118, 48, 255);
    case Style::kMemset: return IM_COL32(170, 168, 92, 255);
    case Style::kGpuSync: return IM_COL32(206, 86, 168, 255);
    case Style::kStallData: return IM_COL32(235, 70, 70, 255);
    case Style::kStallTransfer: return IM_COL32(245, 140, 40, 255);
    case Style::kStallSync: return IM_COL32(210, 80, 200, 255);
    case Style::kStallHost: return IM_COL32(150, 150, 160, 255);
    case Style::kQueueEmpty: return IM_COL32(235, 70, 70, 255);
    default: return IM_COL32(130, 130, 140, 255);
  }
}

inline ImU32 marker_color(uint8_t kind) {
  switch (kind) {
    case kMarkSent: return IM_COL32(250, 210, 90, 255);
    case kMarkRecv: return IM_COL32(120, 220, 250, 255);
    case kMarkPut: return IM_COL32(250, 210, 90, 255);
    case kMarkEpoch: return IM_COL32(255, 255, 255, 255);
    case kMarkWorker: return IM_COL32(200, 160, 250, 255);
    default: return IM_COL32(180, 180, 190, 255);
  }
}

inline ImU32 role_color(LaneRole r) {
  switch (r) {
    case LaneRole::kGpu: return IM_COL32(104, 196, 120, 255);
    case LaneRole::kMain: return IM_COL32(226, 92, 82, 255);
    case LaneRole::kPin: return IM_COL32(168, 120, 222, 255);
    case LaneRole::kWorker: return IM_COL32(74, 138, 222, 255);
    case LaneRole::kOther: return IM_COL32(122, 150, 162, 255);
  }
  return kTextDim;
}

// a..b, channel by channel (alpha included), t clamped to [0, 1].
inline ImU32 mix(ImU32 a, ImU32 b, float t) {
  t = std::clamp(t, 0.0f, 1.0f);
  auto ch = [&](int shift) {
    const float x = static_cast<float>((a >> shift) & 0xFF), y = static_cast<float>((b >> shift) & 0xFF);
    return static_cast<ImU32>(x + (y - x) * t + 0.5f) << shift;
  };
  return ch(IM_COL32_R_SHIFT) | ch(IM_COL32_G_SHIFT) | ch(IM_COL32_B_SHIFT) | ch(IM_COL32_A_SHIFT);
}

// `c` with its alpha replaced by a (0..1).
inline ImU32 with_alpha(ImU32 c, float a) {
  const ImU32 alpha = static_cast<ImU32>(std::clamp(a, 0.0f, 1.0f) * 255.0f + 0.5f);
  return (c & ~IM_COL32_A_MASK) | (alpha << IM_COL32_A_SHIFT);
}

}  // namespace stallscope::ui
