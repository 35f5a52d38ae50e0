/* The version string, from the build (CMake's project version). */
#include "brigade/version.h"

#ifndef BRIGADE_VERSION
#error "BRIGADE_VERSION is set by the build"
#endif

const char *brg_version(void) { return BRIGADE_VERSION; }
