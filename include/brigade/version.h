/* The library's version (the project version of the build). */
#ifndef BRIGADE_VERSION_H
#define BRIGADE_VERSION_H

/* "MAJOR.MINOR.PATCH". */
const char *brg_version(void);

#endif
