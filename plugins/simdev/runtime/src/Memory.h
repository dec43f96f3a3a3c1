// Device memory: host memory handed out by sdMalloc and tracked in a registry,
// so every pointer that must be device memory can be checked.
#ifndef SIMDEV_SRC_MEMORY_H_
#define SIMDEV_SRC_MEMORY_H_

#include <cstddef>

namespace simdev {

// Throws sdErrorInvalidDevicePointer unless [ptr, ptr + size) lies inside one
// live allocation, which must be on `device` unless `device` is -1. `role`
// names the argument in the message ("destination"). Returns the allocation's
// device.
int requireDeviceRange(const void* ptr, size_t size, int device, const char* role);

}  // namespace simdev

#endif  // SIMDEV_SRC_MEMORY_H_
