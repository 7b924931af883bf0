#ifndef COURIER_CLIBPQ_SHIM_H
#define COURIER_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
