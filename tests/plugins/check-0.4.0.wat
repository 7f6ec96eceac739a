;; A component exporting fencing:guard/check@0.4.0: a breaking version for hosts of 0.3.
(component
  (core module $m (func (export "f")))
  (core instance $i (instantiate $m))
  (func $f (canon lift (core func $i "f")))
  (instance $check (export "admit" (func $f)))
  (export "fencing:guard/check@0.4.0" (instance $check))
)
