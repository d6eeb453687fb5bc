# /rollback: отмена изменений файлов недавнего хода (issue 30).
menu-rollback = Отменить изменения файлов недавнего хода
rollback-none = Откатывать нечего: недавние ходы этого разговора не меняли файлы.
rollback-title = ↩️ <b>Ходы, менявшие файлы</b> (сначала новые). Выберите ход, чтобы увидеть, что отменит откат:
# $files: сколько файлов; $added, $removed: строки
rollback-item = <b>Ход { $id }</b> · { $when } · { $files ->
        [one] { $files } файл
        [few] { $files } файла
       *[other] { $files } файлов
    } · +{ $added } −{ $removed }
rollback-item-files = { $names }
rollback-skipped = ⚠️ Без контрольной точки: <code>{ $path }</code> ({ $reason })
btn-rollback-pick = ↩️ Ход { $id } ({ $files ->
        [one] { $files } файл
        [few] { $files } файла
       *[other] { $files } файлов
    })
rollback-file-created = ➕ <code>{ $path }</code> создан (+{ $added })
rollback-file-changed = ✏️ <code>{ $path }</code> изменён (+{ $added } −{ $removed })
rollback-file-deleted = ➖ <code>{ $path }</code> удалён (−{ $removed })
rollback-more-files = … и ещё { $count } (все — в диффе)
rollback-file-binary = ✏️ <code>{ $path }</code> { $how } (двоичный или большой)
rollback-preview = ↩️ <b>Отменить ход { $id }?</b> Каждый изменённый им файл вернётся к прежнему виду; созданные им файлы будут удалены.
rollback-later = Откат отменит и { $count ->
        [one] следующий ход
       *[other] следующие ходы
    } { $ids }: они меняли файлы после него.
rollback-diff-attached = Изменения — в файле выше.
rollback-diff-file = turn-{ $id }.diff
btn-rollback-undo = ↩️ Отменить
btn-rollback-cancel = Отмена
btn-rollback-overwrite = ↩️ Перезаписать и отменить
rollback-changed-since = ⚠️ <b>Вы изменили { $count ->
        [one] этот файл
       *[other] эти файлы
    } после хода { $id }:</b> { $names }. Откат перезапишет { $count ->
        [one] его
       *[other] их
    } содержимым до этого хода. Всё равно отменить?
rollback-done = ↩️ <b>Откат выполнен</b>: ход { $ids }.
rollback-done-restored = Восстановлены: { $names }
rollback-done-deleted = Удалены: { $names }
rollback-cancelled = Откат отменён; ничего не изменилось.
rollback-turn-running = Сейчас идёт ход. Откатите, когда он закончится (или остановите его: /stop).
rollback-command-running = В рабочей папке ещё выполняется команда: { $command }. Откатите, когда она закончится (/jobs её остановит).
rollback-gone = Этот ход уже нельзя откатить (он отменён или его контрольная точка устарела).
