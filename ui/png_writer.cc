// PNG output through stb_image_write, header-only: its implementation is compiled here, static
// (private to this file), so that no stb library is needed at link or run time for it.
#include "ui/png_writer.h"

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#include <cerrno>
#include <cstring>

namespace stallscope::ui {

Status write_png(const std::string& path, int width, int height, const std::vector<uint8_t>& rgba) {
  if (width <= 0 || height <= 0 || rgba.size() < static_cast<size_t>(width) * static_cast<size_t>(height) * 4) {
    return Status::Error("no pixels to write to " + path);
  }
  if (stbi_write_png(path.c_str(), width, height, 4, rgba.data(), width * 4) == 0) {
    return Status::Error("cannot write " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace stallscope::ui
