// Quantities as text, for every room's messages: bytes in binary units.
#pragma once

#include <string>

namespace stallscope {

// Bytes in the largest binary unit that keeps the number >= 1: "512 B", "3.20 MiB", "15.5 GiB", "120 KiB".
std::string bytes_text(double b);

}  // namespace stallscope
