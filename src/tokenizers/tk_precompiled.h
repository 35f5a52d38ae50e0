/* The Precompiled (SentencePiece charsmap) normalizer's data (precompiled.c). */
#ifndef BRIGADE_TK_PRECOMPILED_H
#define BRIGADE_TK_PRECOMPILED_H

#include "tk_internal.h"

typedef struct tk_precompiled tk_precompiled;

brg_status tk_precompiled_parse(const char *b64, tk_precompiled **out);
brg_status tk_precompiled_apply(const tk_precompiled *p, tk_str *s);
void tk_precompiled_free(tk_precompiled *p);

#endif
