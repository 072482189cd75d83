mod engine;
mod ftl_physics;
mod layers;
