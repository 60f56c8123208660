// PNG output through libstb's stb_image_write (the implementation is compiled into libstb).
#include "ui/png_writer.h"

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
