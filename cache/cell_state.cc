#include "cache/cell_state.h"

namespace stripesolve::cache {

std::string_view cell_state_name(CellState s) {
  switch (s) {
    case CellState::kAbsent:
      return "absent";
    case CellState::kWaitDownload:
      return "wait_download";
    case CellState::kDownloading:
      return "downloading";
    case CellState::kWaitElimI:
      return "wait_elim_i";
    case CellState::kElimI:
      return "elim_i";
    case CellState::kWaitElimJ:
      return "wait_elim_j";
    case CellState::kElimJ:
      return "elim_j";
    case CellState::kStuck:
      return "stuck";
    case CellState::kIdle:
      return "idle";
    case CellState::kOnDevice:
      return "on_device";
    case CellState::kWaitUpload:
      return "wait_upload";
    case CellState::kUploading:
      return "uploading";
  }
  return "?";
}

bool is_legal_transition(CellState from, CellState to) {
  using S = CellState;
  switch (from) {
    case S::kAbsent:
      return to == S::kWaitDownload;
    case S::kWaitDownload:
      return to == S::kDownloading;
    case S::kDownloading:  // kIdle: a read-ahead (StripeCache::read_ahead)
      return to == S::kWaitElimI || to == S::kWaitElimJ || to == S::kStuck || to == S::kIdle;
    case S::kWaitElimI:
      return to == S::kElimI;
    case S::kElimI:
      return to == S::kStuck || to == S::kIdle;
    case S::kWaitElimJ:
      return to == S::kElimJ;
    case S::kElimJ:
      return to == S::kIdle || to == S::kOnDevice;
    case S::kOnDevice:
      return to == S::kWaitElimI || to == S::kWaitElimJ;
    case S::kStuck:
      return to == S::kIdle || to == S::kWaitElimI || to == S::kAbsent;
    case S::kIdle:
      return to == S::kWaitElimI || to == S::kWaitElimJ || to == S::kStuck ||
             to == S::kWaitUpload || to == S::kAbsent;
    case S::kWaitUpload:
      return to == S::kUploading;
    case S::kUploading:
      return to == S::kAbsent || to == S::kIdle;
  }
  return false;
}

bool is_in_flight(CellState s) {
  using S = CellState;
  return s == S::kWaitDownload || s == S::kDownloading || s == S::kWaitElimI || s == S::kElimI ||
         s == S::kWaitElimJ || s == S::kElimJ || s == S::kWaitUpload || s == S::kUploading;
}

}  // namespace stripesolve::cache
