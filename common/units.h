// Quantities as text, for every room's messages: bytes in binary units.
#pragma once

#include <string>

namespace stallscope {

// Bytes in the largest binary unit that keeps the number >= 1: "512 B", "3.2 MiB", "1.50 GiB".
std::string bytes_text(double b);

}  // namespace stallscope
