// Fonts from assets/fonts (DejaVu Sans and Sans Mono, with the arrows and play/pause symbols the
// views use); ImGui's built-in font when the files are missing.
#pragma once

#include <string>

#include "ui/views.h"

namespace stallscope::ui {

// The assets folder: $STALLSCOPE_ASSETS, beside the installed binary (../share/stallscope/assets),
// the source tree's (../../assets from build/bin), or the one this build was configured from.
// Empty when none exists.
std::string find_assets_dir();

// Adds the fonts to the current context's atlas (before it is built).
UiFonts load_fonts(float scale = 1.0f);

}  // namespace stallscope::ui
