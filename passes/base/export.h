// The internal interface libkiln.so exports on purpose, beside its public API (kiln/export.h):
// what kiln's own CLI and Python extension call. Everything else in libkiln.so is hidden; kiln's
// C++ tests link the layers' objects instead of the library (docs/architecture.md).
#pragma once

#define KILN_INTERNAL __attribute__((visibility("default")))
