// The per-cell state machine of the stripe cache: 002 §8.3, Fig 19 ("N-plicated multithreaded
// finite-state machine"). Every cached stripe part has one state; the roles of scheduler/ move it
// along the edges below, and only StripeCache::transition_locked() changes it (checking the edge,
// logging old -> new at trace level, waking waiters).
//
// Paths (002 §8.3):
//   I-type elimination: kAbsent -> kWaitDownload -> kDownloading -> kWaitElimI -> kElimI -> kStuck
//                       or kIdle/kStuck -> kWaitElimI -> ...; kStuck -> kIdle when count hits 0.
//   J-type elimination: kAbsent -> kWaitDownload -> kDownloading -> kWaitElimJ -> kElimJ -> kIdle
//                       or kIdle -> kWaitElimJ -> ...
//   DSR (read only):    kAbsent -> ... -> kDownloading -> kStuck, or kIdle -> kStuck;
//                       read by the master, then kStuck -> kAbsent (deleted).
//   Eviction:           kIdle -> kWaitUpload -> kUploading -> kAbsent (dirty), kIdle -> kAbsent
//   (clean). Write-back at the end of the triangulation (parts stay cached, clean, for the
//   substitution):
//                       kIdle -> kWaitUpload -> kUploading -> kIdle.
//   DSR parts that stay cached after their read: kStuck -> kIdle.
//   Read-ahead (StripeCache::read_ahead): kAbsent -> ... -> kDownloading -> kIdle (clean), a hit
//                       for the task that needs the part.
//   GPU tier (8b): kElimJ -> kOnDevice when the elim.J worker keeps J's updated values on the
//                       device instead of copying them back; kOnDevice -> kWaitElimI / kWaitElimJ
//                       when the master requests the part again (a hit: the device instance is
//                       used, no copy).
//
// Thread-safety: plain enum and pure functions.
#pragma once

#include <string_view>

namespace stripesolve::cache {

enum class CellState {
  // No cell: the part is only on the SSDs ("waiting in L_SSD"). Start and end of every path.
  kAbsent,
  // Created by the master (or DSR) with a target state; the I/O role moves it to kDownloading.
  // Not evictable.
  kWaitDownload,
  // The I/O role is reading it; the I/O role moves it to its target (kWaitElimI, kWaitElimJ or
  // kStuck). Not evictable.
  kDownloading,
  // Waits for its I-type elimination (<II>, <IK>); the elim.I role moves it to kElimI.
  // Set by the I/O role (after download) or by the master (from kIdle/kStuck). Not evictable.
  kWaitElimI,
  // elim.I is eliminating it; elim.I moves it to kStuck (J stripes still need it) or kIdle
  // (none do: the last stripe). Not evictable. Leaving it marks the cell dirty.
  kElimI,
  // Waits for a J-type elimination by the stripes [elim_begin, elim_end); an elim.J worker moves
  // it to kElimJ. Set by the I/O role or the master (from kIdle). Not evictable.
  kWaitElimJ,
  // An elim.J worker is updating it (<JI>, <JK>); that worker moves it to kIdle. Not evictable.
  // Leaving it marks the cell dirty.
  kElimJ,
  // "Stuck waiting": needed again for sure (an eliminated I stripe with count > 0 J stripes still
  // to update, or a DSR part not yet read). Moved on by the elim.J worker that drops count to 0
  // (-> kIdle), by the master (-> kWaitElimI, or -> kAbsent after reading a DSR part).
  // Never evicted.
  kStuck,
  // Waiting idly in RAM. Evictable (the longest idle first). Moved on by the master
  // (-> kWaitElimI, kWaitElimJ), by DSR (-> kStuck) or by the evictor (-> kWaitUpload if dirty,
  // -> kAbsent if clean).
  kIdle,
  // The part's values are newer on the device than in RAM (the GPU tier kept J resident after
  // its update); the RAM extent stays reserved for when they come back, or, where the device
  // holds every column of the part, goes back to the arena until the part's elimination
  // (stripe_cache.h: UpdatedJ). Moved on by the master only (-> kWaitElimI, kWaitElimJ); the elim
  // role then works on the device instance and copies the values back when it gives the part
  // up. Not evictable: the RAM values are stale or gone.
  kOnDevice,
  // Chosen for eviction, dirty; the I/O role moves it to kUploading. Not evictable again.
  kWaitUpload,
  // The I/O role is writing it back; it moves it to kAbsent (evicted: cell deleted, extent
  // freed) or, for an end-of-phase write-back, to kIdle (kept, now clean). Not evictable.
  kUploading,
};

std::string_view cell_state_name(CellState s);

// Whether the state machine has the edge from -> to.
bool is_legal_transition(CellState from, CellState to);

// Whether a cell in this state may be chosen for eviction.
inline bool is_evictable(CellState s) {
  return s == CellState::kIdle;
}

// Whether a cell in this state will move on without the master doing anything more (an operation
// is queued or running), so waiting for memory may succeed.
bool is_in_flight(CellState s);

}  // namespace stripesolve::cache
