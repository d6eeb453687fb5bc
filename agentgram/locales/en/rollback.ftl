# /rollback: undo the file changes of a recent turn (issue 30).
menu-rollback = Undo the file changes of a recent turn
rollback-none = Nothing to roll back: no recent turn of this conversation changed files.
rollback-title = ↩️ <b>Turns that changed files</b> (newest first). Choose one to see what undoing it would undo:
# $files: how many files; $added, $removed: lines
rollback-item = <b>Turn { $id }</b> · { $when } · { $files ->
        [one] { $files } file
       *[other] { $files } files
    } · +{ $added } −{ $removed }
rollback-item-files = { $names }
rollback-skipped = ⚠️ Not checkpointed: <code>{ $path }</code> ({ $reason })
btn-rollback-pick = ↩️ Turn { $id } ({ $files ->
        [one] { $files } file
       *[other] { $files } files
    })
rollback-file-created = ➕ <code>{ $path }</code> created (+{ $added })
rollback-file-changed = ✏️ <code>{ $path }</code> changed (+{ $added } −{ $removed })
rollback-file-deleted = ➖ <code>{ $path }</code> deleted (−{ $removed })
rollback-more-files = … and { $count } more (all in the diff)
rollback-file-binary = ✏️ <code>{ $path }</code> { $how } (binary or large)
rollback-preview = ↩️ <b>Undo turn { $id }?</b> Every file it changed goes back to how it was before; files it created are deleted.
rollback-later = It also undoes the later { $count ->
        [one] turn
       *[other] turns
    } { $ids }, which changed files after it.
rollback-diff-attached = The diff is in the file above.
rollback-diff-file = turn-{ $id }.diff
btn-rollback-undo = ↩️ Undo
btn-rollback-cancel = Cancel
btn-rollback-overwrite = ↩️ Overwrite and undo
rollback-changed-since = ⚠️ <b>You changed { $count ->
        [one] this file
       *[other] these files
    } since turn { $id }:</b> { $names }. Undo overwrites { $count ->
        [one] it
       *[other] them
    } with the content from before the turn. Undo anyway?
rollback-done = ↩️ <b>Rolled back</b> turn { $ids }.
rollback-done-restored = Restored: { $names }
rollback-done-deleted = Deleted: { $names }
rollback-cancelled = Rollback cancelled; nothing changed.
rollback-turn-running = A turn is running. Roll back when it has finished (or /stop it).
rollback-command-running = A command is still running in the workdir: { $command }. Roll back when it has finished (/jobs stops it).
rollback-gone = This turn can no longer be rolled back (already undone, or its checkpoint expired).
