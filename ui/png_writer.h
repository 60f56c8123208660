// Writes RGBA pixels as a PNG (stb_image_write, compiled into png_writer.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace stallscope::ui {

// `rgba` is width*height*4 bytes, top row first.
Status write_png(const std::string& path, int width, int height, const std::vector<uint8_t>& rgba);

}  // namespace stallscope::ui
