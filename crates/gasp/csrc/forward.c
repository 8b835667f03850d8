/* The one function of the gasp crate written in C: Rust can call a variadic function
 * but cannot define one, and a tool's gasp_event_notifyVA needs a va_list. Rust calls
 * this with the event's arguments as varargs; it packs them into a va_list and forwards. */
#include <stdarg.h>

typedef void (*gasp_notify_va_fn)(void *context, unsigned int evttag, int evttype,
                                  const char *filename, int linenum, int colnum,
                                  va_list varargs);

void pgas_gasp_forward_va(gasp_notify_va_fn notify, void *context, unsigned int evttag,
                          int evttype, const char *filename, int linenum, int colnum, ...)
{
    va_list ap;
    va_start(ap, colnum);
    notify(context, evttag, evttype, filename, linenum, colnum, ap);
    va_end(ap);
}
