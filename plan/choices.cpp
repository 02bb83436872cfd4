#include "plan/choices.h"

#include <fmt/format.h>
#include <stdexcept>

namespace sink {

void throw_unknown_choice(std::string_view field, std::string_view value, const std::vector<std::string>& names) {
  throw std::invalid_argument(fmt::format("{}: unknown value '{}' (one of {})", field, value, fmt::join(names, "|")));
}

}  // namespace sink
