/* A GASP tool written in C (GASP 1.4 §3.2-3.4), used by tests/gasp_ctool.rs to check
 * the C side of the tool interface: the symbols the runtime looks up, the context it
 * passes back, and the varargs of every event, read with va_arg as gasp_upcxx.h
 * declares them.
 *
 * Each rank writes "$GASP_CTOOL_OUT.$UPCXX_RANK" (or the rank an MPI launcher gave it;
 * stderr if GASP_CTOOL_OUT is unset),
 * one line per call, flushed as it is written (a rank ends with exit() right after
 * finalizing, and a line left in a buffer would be lost if the rank died):
 *
 *   init LANG ARGC ENTRY          gasp_init; ENTRY is notifyVA if this build exports
 *                                 gasp_event_notifyVA, else notify
 *   create TAG NAME DESC          gasp_create_event (DESC "(null)" when absent)
 *   control ON PREVIOUS           gasp_control
 *   TAG NAME TYPE FILE:LINE:COL ARGS...
 *                                 an event while measuring; FILE is the basename;
 *                                 ARGS are the event's arguments for TYPE, a
 *                                 pointer-to-shared as RANK:ADDR, a local pointer as
 *                                 0xADDR; a user event's values are printed by its DESC
 *   exit VA VARIADIC DROPPED      at exit: the calls that came through
 *                                 gasp_event_notifyVA and gasp_event_notify, and how
 *                                 many of them were events while not measuring
 *
 * Built with -DCTOOL_VARIADIC_ONLY the library does not export gasp_event_notifyVA, so
 * the runtime must call the variadic gasp_event_notify. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gasp.h"

#define MAX_USER_EVENTS 64

struct user_event {
    char *name;
    char *desc; /* NULL: no values */
};

struct _gasp_context_S {
    pthread_mutex_t lock; /* guards everything below: events come from any thread */
    gasp_lang_t language;
    int argc;
    FILE *out;
    int measuring;
    unsigned long calls_va, calls_variadic, dropped;
    unsigned int nuser;
    struct user_event user[MAX_USER_EVENTS];
};

/* The one context: exit_line needs it, and atexit handlers take no argument. */
static struct _gasp_context_S *the_context;

/* A line under construction: appended to with snprintf, written with one fputs. */
struct line {
    char text[4096];
    size_t len;
};

static void vadd(struct line *l, const char *fmt, va_list ap)
{
    int n;
    if (l->len + 1 >= sizeof l->text)
        return;
    n = vsnprintf(l->text + l->len, sizeof l->text - l->len, fmt, ap);
    if (n > 0)
        l->len += (size_t)n;
    if (l->len >= sizeof l->text)
        l->len = sizeof l->text - 1;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void add(struct line *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vadd(l, fmt, ap);
    va_end(ap);
}

/* `add` with a format made at run time (a user event's conversion). */
static void add_value(struct line *l, const char *spec, ...)
{
    va_list ap;
    va_start(ap, spec);
    vadd(l, spec, ap);
    va_end(ap);
}

/* Writes and flushes one line; the caller holds the context's lock. */
static void emit(struct _gasp_context_S *c, struct line *l)
{
    size_t i;
    for (i = 0; i < l->len; i++)
        if (l->text[i] == '\n')
            l->text[i] = ' ';
    fputs(l->text, c->out);
    fputc('\n', c->out);
    fflush(c->out);
}

static char *copy(const char *s)
{
    char *d;
    if (s == NULL)
        return NULL;
    d = malloc(strlen(s) + 1);
    if (d != NULL)
        strcpy(d, s);
    return d;
}

static void exit_line(void)
{
    struct _gasp_context_S *c = the_context;
    struct line l = {{0}, 0};
    pthread_mutex_lock(&c->lock);
    add(&l, "exit %lu %lu %lu", c->calls_va, c->calls_variadic, c->dropped);
    emit(c, &l);
    pthread_mutex_unlock(&c->lock);
}

gasp_context_t gasp_init(gasp_lang_t srclanguage, int *argc, char ***argv)
{
    struct _gasp_context_S *c = calloc(1, sizeof *c);
    const char *out = getenv("GASP_CTOOL_OUT");
    /* The smp launcher's rank variable, else an MPI launcher's (the mpi conduit). */
    const char *rank = getenv("UPCXX_RANK");
    if (rank == NULL)
        rank = getenv("OMPI_COMM_WORLD_RANK");
    if (rank == NULL)
        rank = getenv("PMIX_RANK");
    if (rank == NULL)
        rank = getenv("PMI_RANK");
    struct line l = {{0}, 0};
    (void)argv;
    if (c == NULL) {
        fprintf(stderr, "ctool: out of memory\n");
        abort();
    }
    pthread_mutex_init(&c->lock, NULL);
    c->language = srclanguage;
    c->argc = argc != NULL ? *argc : -1;
    c->measuring = 1;
    c->out = stderr;
    if (out != NULL) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%s", out, rank != NULL ? rank : "0");
        c->out = fopen(path, "w");
        if (c->out == NULL) {
            fprintf(stderr, "ctool: cannot open %s\n", path);
            abort();
        }
    }
#ifdef CTOOL_VARIADIC_ONLY
    add(&l, "init %d %d notify", (int)c->language, c->argc);
#else
    add(&l, "init %d %d notifyVA", (int)c->language, c->argc);
#endif
    emit(c, &l);
    the_context = c;
    atexit(exit_line);
    return c;
}

static const char *type_name(gasp_evttype_t t)
{
    switch (t) {
    case GASP_START:
        return "START";
    case GASP_END:
        return "END";
    case GASP_ATOMIC:
        return "ATOMIC";
    }
    return "?";
}

static const char *basename_of(const char *path)
{
    const char *slash = path != NULL ? strrchr(path, '/') : NULL;
    if (path == NULL)
        return "(null)";
    return slash != NULL ? slash + 1 : path;
}

/* Argument readers: one va_arg each, in the order of the event's argument list. */
static void a_int(struct line *l, va_list *ap)
{
    add(l, " %d", va_arg(*ap, int));
}

static void a_size(struct line *l, va_list *ap)
{
    add(l, " %zu", va_arg(*ap, size_t));
}

static void a_u64(struct line *l, va_list *ap)
{
    add(l, " %" PRIu64, va_arg(*ap, uint64_t));
}

static void a_ptr(struct line *l, va_list *ap)
{
    add(l, " 0x%" PRIxPTR, (uintptr_t)va_arg(*ap, void *));
}

static void a_gptr(struct line *l, va_list *ap)
{
    const gasp_upcxx_gptr_t *p = va_arg(*ap, const gasp_upcxx_gptr_t *);
    if (p == NULL)
        add(l, " (null)");
    else
        add(l, " %" PRIu32 ":0x%" PRIx64, p->rank, p->addr);
}

static void a_handle(struct line *l, va_list *ap)
{
    add(l, " %" PRIu64, (uint64_t)va_arg(*ap, gasp_upc_nb_handle_t));
}

/* Prints a user event's values as its desc, a printf format, says: each conversion
 * reads the C type it names. Only the values are printed, not the desc's other text. */
static void user_values(struct line *l, const char *desc, va_list *ap)
{
    const char *p = desc;
    while (p != NULL && *p != '\0') {
        char spec[32];
        size_t n = 0;
        int longs = 0, size = 0;
        if (*p++ != '%')
            continue;
        if (*p == '%') {
            p++;
            continue;
        }
        spec[n++] = '%';
        while (*p != '\0' && strchr("-+ #0123456789.", *p) != NULL && n < 16)
            spec[n++] = *p++;
        for (; (*p == 'l' && longs < 2) || (*p == 'z' && !size); p++) {
            if (*p == 'l')
                longs++;
            else
                size = 1;
            spec[n++] = *p;
        }
        spec[n++] = *p;
        spec[n] = '\0';
        add(l, " ");
        if (((size || longs == 2) && strchr("cspfFeEgGaA", *p) != NULL)
            || (longs == 1 && strchr("csp", *p) != NULL)) {
            /* Not a type an event passes (wide characters, say): the values after it
             * cannot be located. */
            add(l, "?");
            return;
        }
        switch (*p) {
        case 'd':
        case 'i':
            if (size)
                add_value(l, spec, va_arg(*ap, size_t));
            else if (longs == 2)
                add_value(l, spec, va_arg(*ap, long long));
            else if (longs == 1)
                add_value(l, spec, va_arg(*ap, long));
            else
                add_value(l, spec, va_arg(*ap, int));
            break;
        case 'u':
        case 'x':
        case 'X':
        case 'o':
            if (size)
                add_value(l, spec, va_arg(*ap, size_t));
            else if (longs == 2)
                add_value(l, spec, va_arg(*ap, unsigned long long));
            else if (longs == 1)
                add_value(l, spec, va_arg(*ap, unsigned long));
            else
                add_value(l, spec, va_arg(*ap, unsigned int));
            break;
        case 'c':
            add_value(l, spec, va_arg(*ap, int));
            break;
        case 'f':
        case 'F':
        case 'e':
        case 'E':
        case 'g':
        case 'G':
        case 'a':
        case 'A':
            add_value(l, spec, va_arg(*ap, double));
            break;
        case 's': {
            const char *s = va_arg(*ap, const char *);
            add_value(l, spec, s != NULL ? s : "(null)");
            break;
        }
        case 'p':
            add_value(l, spec, va_arg(*ap, void *));
            break;
        default:
            /* A conversion this tool does not read: the rest cannot be located. */
            add(l, "?");
            return;
        }
        p++;
    }
}

/* Prints one event's arguments; returns its name. */
static const char *event_args(struct _gasp_context_S *c, struct line *l, unsigned int tag,
                              gasp_evttype_t type, va_list *ap)
{
    int end = type == GASP_END;
    switch (tag) {
    case GASP_UPC_COLLECTIVE_EXIT:
        a_int(l, ap); /* status */
        return "GASP_UPC_COLLECTIVE_EXIT";
    case GASP_UPC_NONCOLLECTIVE_EXIT:
        a_int(l, ap); /* status */
        return "GASP_UPC_NONCOLLECTIVE_EXIT";
    case GASP_UPC_NOTIFY:
    case GASP_UPC_WAIT:
    case GASP_UPC_BARRIER:
        a_int(l, ap); /* named */
        a_int(l, ap); /* expr */
        return tag == GASP_UPC_NOTIFY ? "GASP_UPC_NOTIFY"
               : tag == GASP_UPC_WAIT ? "GASP_UPC_WAIT"
                                      : "GASP_UPC_BARRIER";
    case GASP_UPC_ALLOC:
        a_size(l, ap); /* nbytes */
        if (end)
            a_gptr(l, ap); /* newshrd_ptr */
        return "GASP_UPC_ALLOC";
    case GASP_UPC_FREE:
        a_gptr(l, ap); /* shrd_ptr */
        return "GASP_UPC_FREE";
    case GASP_UPC_LOCK:
        a_ptr(l, ap); /* lck */
        return "GASP_UPC_LOCK";
    case GASP_UPC_LOCK_ATTEMPT:
        a_ptr(l, ap); /* lck */
        if (end)
            a_int(l, ap); /* result */
        return "GASP_UPC_LOCK_ATTEMPT";
    case GASP_UPC_UNLOCK:
        a_ptr(l, ap); /* lck */
        return "GASP_UPC_UNLOCK";
    case GASP_UPC_GET:
    case GASP_UPC_NB_GET_INIT:
        a_int(l, ap);  /* is_relaxed */
        a_ptr(l, ap);  /* dst */
        a_gptr(l, ap); /* src */
        a_size(l, ap); /* n */
        if (tag == GASP_UPC_NB_GET_INIT && end)
            a_handle(l, ap);
        return tag == GASP_UPC_GET ? "GASP_UPC_GET" : "GASP_UPC_NB_GET_INIT";
    case GASP_UPC_PUT:
    case GASP_UPC_NB_PUT_INIT:
        a_int(l, ap);  /* is_relaxed */
        a_gptr(l, ap); /* dst */
        a_ptr(l, ap);  /* src */
        a_size(l, ap); /* n */
        if (tag == GASP_UPC_NB_PUT_INIT && end)
            a_handle(l, ap);
        return tag == GASP_UPC_PUT ? "GASP_UPC_PUT" : "GASP_UPC_NB_PUT_INIT";
    case GASP_UPC_NB_SYNC:
        a_handle(l, ap);
        return "GASP_UPC_NB_SYNC";
    case GASP_UPCXX_RPC_SEND:
    case GASP_UPCXX_RPC_EXECUTE:
        a_int(l, ap);  /* target or source */
        a_size(l, ap); /* nbytes */
        a_u64(l, ap);  /* msgid */
        return tag == GASP_UPCXX_RPC_SEND ? "GASP_UPCXX_RPC_SEND" : "GASP_UPCXX_RPC_EXECUTE";
    case GASP_UPCXX_FUTURE_WAIT:
        return "GASP_UPCXX_FUTURE_WAIT";
    case GASP_UPCXX_PROMISE_FULFILL:
        a_size(l, ap); /* count */
        return "GASP_UPCXX_PROMISE_FULFILL";
    case GASP_UPCXX_PROGRESS:
        a_int(l, ap); /* level */
        return "GASP_UPCXX_PROGRESS";
    case GASP_GEX_AM_REQUEST:
    case GASP_GEX_AM_REPLY:
    case GASP_GEX_AM_HANDLER:
        a_int(l, ap);  /* target or source */
        a_int(l, ap);  /* handler */
        a_int(l, ap);  /* category */
        a_size(l, ap); /* nbytes */
        return tag == GASP_GEX_AM_REQUEST ? "GASP_GEX_AM_REQUEST"
               : tag == GASP_GEX_AM_REPLY ? "GASP_GEX_AM_REPLY"
                                          : "GASP_GEX_AM_HANDLER";
    case GASP_GEX_POLL:
        return "GASP_GEX_POLL";
    }
    if (tag >= GASP_UPCXX_USEREVT_START && tag - GASP_UPCXX_USEREVT_START < c->nuser) {
        const struct user_event *u = &c->user[tag - GASP_UPCXX_USEREVT_START];
        user_values(l, u->desc, ap);
        return u->name;
    }
    return "?";
}

static void notify(struct _gasp_context_S *c, unsigned int evttag, gasp_evttype_t evttype,
                   const char *filename, int linenum, int colnum, va_list *ap, int via_va)
{
    struct line l = {{0}, 0};
    struct line args = {{0}, 0};
    const char *name;
    pthread_mutex_lock(&c->lock);
    if (via_va)
        c->calls_va++;
    else
        c->calls_variadic++;
    if (!c->measuring) {
        c->dropped++;
        pthread_mutex_unlock(&c->lock);
        return;
    }
    name = event_args(c, &args, evttag, evttype, ap);
    add(&l, "%u %s %s %s:%d:%d%s", evttag, name, type_name(evttype), basename_of(filename),
        linenum, colnum, args.text);
    emit(c, &l);
    pthread_mutex_unlock(&c->lock);
}

#ifndef CTOOL_VARIADIC_ONLY
void gasp_event_notifyVA(gasp_context_t context, unsigned int evttag, gasp_evttype_t evttype,
                         const char *filename, int linenum, int colnum, va_list varargs)
{
    /* A va_list parameter may be an array that decayed to a pointer: copy it into a
     * real va_list before taking its address. */
    va_list ap;
    va_copy(ap, varargs);
    notify(context, evttag, evttype, filename, linenum, colnum, &ap, 1);
    va_end(ap);
}
#endif

void gasp_event_notify(gasp_context_t context, unsigned int evttag, gasp_evttype_t evttype,
                       const char *filename, int linenum, int colnum, ...)
{
    va_list ap;
    va_start(ap, colnum);
    notify(context, evttag, evttype, filename, linenum, colnum, &ap, 0);
    va_end(ap);
}

int gasp_control(gasp_context_t context, int on)
{
    struct line l = {{0}, 0};
    int previous;
    pthread_mutex_lock(&context->lock);
    previous = context->measuring;
    context->measuring = on != 0;
    add(&l, "control %d %d", on, previous);
    emit(context, &l);
    pthread_mutex_unlock(&context->lock);
    return previous;
}

unsigned int gasp_create_event(gasp_context_t context, const char *name, const char *desc)
{
    struct line l = {{0}, 0};
    unsigned int tag;
    pthread_mutex_lock(&context->lock);
    if (context->nuser == MAX_USER_EVENTS) {
        /* Out of tags: later events share the last one (values printed by its desc). */
        tag = GASP_UPCXX_USEREVT_START + MAX_USER_EVENTS - 1;
    } else {
        struct user_event *u = &context->user[context->nuser];
        u->name = copy(name != NULL ? name : "(null)");
        u->desc = copy(desc);
        tag = GASP_UPCXX_USEREVT_START + context->nuser++;
    }
    add(&l, "create %u %s %s", tag, name != NULL ? name : "(null)", desc != NULL ? desc : "(null)");
    emit(context, &l);
    pthread_mutex_unlock(&context->lock);
    return tag;
}
