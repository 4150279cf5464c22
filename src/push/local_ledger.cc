// Placeholder: filled in by the push work (see local_ledger.h).
#include "push/local_ledger.h"
