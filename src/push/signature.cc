// Placeholder: filled in by the push work (see signature.h).
#include "push/signature.h"
