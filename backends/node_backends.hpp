// The copyrpc node backends, and the one place where the run-time choice of one
// (BackendKind, from the command line) becomes a type: with_node_backend(kind, f) calls
// f.template operator()<B>() with B the traits of that backend, so that the caller
// instantiates Node<B, R> for it.
#pragma once

#include <stdexcept>
#include <string>

#include "backends/backend_kind.hpp"
#include "backends/delegation/delegation.hpp"
#include "backends/direct/direct.hpp"
#include "backends/meta/meta.hpp"
#include "backends/node.hpp"

namespace bkv::backend {

template <class F>
decltype(auto) with_node_backend(BackendKind kind, F&& f) {
  switch (kind) {
    case BackendKind::kMeta: return f.template operator()<MetaBackend>();
    case BackendKind::kDelegation: return f.template operator()<DelegationBackend>();
    case BackendKind::kDirect: return f.template operator()<DirectBackend>();
    case BackendKind::kUcxAm: break;
  }
  throw std::invalid_argument("backend '" + std::string(to_string(kind)) +
                              "' is not a copyrpc node backend (meta, delegation, direct)");
}

}  // namespace bkv::backend
