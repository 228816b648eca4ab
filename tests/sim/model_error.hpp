// The message sim::Model::from_json throws for a model JSON, or "" if it is accepted:
// what the model-key tests compare against the expected error.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/model.hpp"

namespace bkv::test {

inline std::string model_error(const nlohmann::json& j) {
  try {
    sim::Model::from_json(j, "m");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace bkv::test
