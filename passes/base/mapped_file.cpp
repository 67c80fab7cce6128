#include "passes/base/mapped_file.h"

#include <sys/mman.h>

namespace kiln {

std::shared_ptr<const std::string_view> map_private(int fd, size_t length) {
  if (length == 0) return std::make_shared<const std::string_view>();
  void* address = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (address == MAP_FAILED) return nullptr;
  return std::shared_ptr<const std::string_view>(
      new std::string_view(static_cast<const char*>(address), length),
      [length](const std::string_view* view) {
        ::munmap(const_cast<char*>(view->data()), length);
        delete view;
      });
}

}  // namespace kiln
