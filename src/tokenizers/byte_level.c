/* GPT-2's reversible byte <-> printable character table (bytes_to_unicode): the 188 printable
 * Latin-1 bytes map to themselves, the other 68 to U+0100.. in byte order. */
#include "tk_internal.h"

static bool printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t tk_byte_to_char(uint8_t b) {
    if (printable(b)) return b;
    uint32_t k = 0;
    for (unsigned x = 0; x < b; x++)
        if (!printable(x)) k++;
    return 0x100 + k;
}

int tk_char_to_byte(uint32_t cp) {
    if (cp < 0x100) return printable(cp) ? (int)cp : -1;
    if (cp >= 0x100 + 68) return -1;
    uint32_t k = cp - 0x100;
    for (unsigned x = 0; x < 256; x++)
        if (!printable(x) && k-- == 0) return (int)x;
    return -1;
}
