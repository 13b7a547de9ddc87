// SPDX-License-Identifier: Apache-2.0 OR MIT
//
// Not a program: build.rs compiles this file with the lane's flags only to
// read, from its BTF, the layout of lane.h's structs that the lane
// program's own BTF lacks. The program's BTF has the types of its maps and
// functions, not those it only points to: struct lane_trace, the record it
// writes into the lane_trace ring buffer (a ring buffer map has no value
// type), is one. src/lane/layout.rs checks its mirror against lane.o's
// BTF first, these anchors second; a struct in neither fails its build.

#include "../lane.h"

struct lane_trace lane_layout_trace;
