#pragma once
// "Did you mean ...?" for unknown names in configs and expressions, and lists of names in messages.

#include <string>
#include <string_view>
#include <vector>

namespace eddy {

// Edit distance counting insertions, deletions, substitutions and swaps of neighbours as one.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `name`, when it is close enough to be a plausible typo (at most a
// third of the name's length in edits, rounded up); empty otherwise.
std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)", or "" when nothing is close.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);

// "a, b, c".
std::string comma_separated(const std::vector<std::string>& names);

}  // namespace eddy
