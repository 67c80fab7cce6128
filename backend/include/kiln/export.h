// What libkiln.so exports. It is built with hidden visibility: only declarations marked KILN_API
// (the public API, in these headers) are visible to the programs that link it.
#pragma once

#define KILN_API __attribute__((visibility("default")))
