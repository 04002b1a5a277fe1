// Accumulating delta reports (include/ditto/request_output.h) into one output.
#pragma once

#include "ditto/request_output.h"

namespace ditto {

// Appends a kDelta report to the output accumulated so far (the first report may be appended to a
// default RequestOutput). Choices are matched by index.
void append_delta(RequestOutput& acc, RequestOutput&& delta);

}  // namespace ditto
