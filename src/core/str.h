/* Small string helpers shared inside the library. */
#ifndef BRIGADE_STR_H
#define BRIGADE_STR_H

/* A malloc'd string formatted like printf (NULL when out of memory); free() it. */
char *brg_str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
