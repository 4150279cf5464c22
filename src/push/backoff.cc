// Placeholder: filled in by the push work (see backoff.h).
#include "push/backoff.h"
