/* gasp.h: the GASP 1.4 tool interface (GASP spec section 3.5), as implemented by the
 * Rust PGAS stack (crates gex, upcxx, gasp). A tool is a shared library exporting
 * gasp_init, gasp_event_notify and/or gasp_event_notifyVA, gasp_control and
 * gasp_create_event; select it at run time with GASP_TOOL=/path/to/libtool.so. */
#ifndef GASP_H
#define GASP_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GASP_VERSION 20051101

/* Section 3.2. GASP_LANG_UPCXX and GASP_LANG_GEX are this implementation's languages. */
typedef enum {
    GASP_LANG_UPC,
    GASP_LANG_TITANIUM,
    GASP_LANG_CAF,
    GASP_LANG_MPI,
    GASP_LANG_SHMEM,
    GASP_LANG_UPCXX,
    GASP_LANG_GEX
} gasp_lang_t;

struct _gasp_context_S;
typedef struct _gasp_context_S *gasp_context_t;

typedef enum {
    GASP_START,
    GASP_END,
    GASP_ATOMIC
} gasp_evttype_t;

gasp_context_t gasp_init(gasp_lang_t srclanguage, int *argc, char ***argv);

void gasp_event_notify(gasp_context_t context, unsigned int evttag,
                       gasp_evttype_t evttype, const char *filename,
                       int linenum, int colnum, ...);

void gasp_event_notifyVA(gasp_context_t context, unsigned int evttag,
                         gasp_evttype_t evttype, const char *filename,
                         int linenum, int colnum, va_list varargs);

/* Section 3.3: returns the previous setting (nonzero before the first call). */
int gasp_control(gasp_context_t context, int on);

/* Section 3.4. */
unsigned int gasp_create_event(gasp_context_t context, const char *name, const char *desc);

#ifdef __cplusplus
}
#endif

/* The event tags and argument types of this implementation. */
#include "gasp_upcxx.h"

#endif /* GASP_H */
