// Placeholder: filled in by the push work (see pusher.h).
#include "push/pusher.h"
