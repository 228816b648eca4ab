// Objects UCX holds by address while an operation is in flight (the user data of a send
// or receive callback: a response being sent, a value being received). A daemon takes
// one per operation and gives it back when the operation's callback ran; they are made
// on demand and stay at their address until the pool goes.
#pragma once

#include <memory>
#include <vector>

namespace bkv::ucx_am {

template <class T>
class HeldSlots {
 public:
  // A free object (as its last user left it), or a new default-constructed one.
  T* take() {
    if (free_.empty()) {
      all_.push_back(std::make_unique<T>());
      return all_.back().get();
    }
    T* t = free_.back();
    free_.pop_back();
    return t;
  }
  void give_back(T* t) { free_.push_back(t); }

 private:
  std::vector<std::unique_ptr<T>> all_;
  std::vector<T*> free_;
};

}  // namespace bkv::ucx_am
