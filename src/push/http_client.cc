// Placeholder: filled in by the push work (see http_client.h).
#include "push/http_client.h"
